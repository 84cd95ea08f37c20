package quota

import (
	"context"
	"testing"
	"time"
)

// The steady-state bytes-per-entry table of docs/benchmarks.md comes from
// this test:
//
//	go test ./quota -run TestMemoryPerEntrySteadyState -v -memusage.max 1000000
//
// By default it measures 10,000, 50,000, 100,000 and 102,000 entries, some
// 20 s (at 50,000 and 100,000 a rewritten log's room lands just past one
// of the allocator's size classes: the worst case); -memusage.max 1000000
// adds 500,000 and 1,000,000, minutes more.
//
// An identity charges once a millisecond under a window of n milliseconds,
// so its log holds n entries once full, one charge in and one out: as it
// runs, records leave from the head and the string is compacted now and
// then, and Redis grows it as it sees fit. The test fills the window, then
// runs on for 1.2 windows (more than a whole cycle of compaction) and
// reads MEMORY USAGE every n/20 charges: the largest reading over the
// cycle, over n, must stay at most 16 bytes an entry. The plan is one of
// tileapi's kind (costs below 2^16), whose records are 6 bytes.
func TestMemoryPerEntrySteadyState(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	if err := loadLibrary(t, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("%9s %12s %12s %9s", "entries", "least bytes", "most bytes", "most/entry")
	for _, n := range []int{10_000, 50_000, 100_000, 102_000, 500_000, 1_000_000} {
		if n > *memusageMax {
			continue
		}
		var tick int64
		s := NewRedis(c, WithPrefix(testPrefix(t)), withClock(func() time.Time {
			return epoch.Add(time.Duration(tick) * time.Millisecond)
		}))
		p := mustPlan(t, "steady", Limit{Name: "w", Max: 1<<24 - 1, Window: time.Duration(n) * time.Millisecond})
		t.Cleanup(func() { c.Del(context.Background(), s.key("m")) })
		var least, most int64 = 1 << 62, 0
		total := n + n*12/10
		for tick < int64(total) {
			pipe := c.Pipeline()
			for ; tick < int64(total) && pipe.Len() < 1000; tick++ {
				keys, args := s.chargeArgs(&chargeCall{identity: "m", plan: p, cost: 1, record: true})
				s.queueScript(ctx, pipe, chargeFn, keys, args...)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if tick > int64(n) && tick%int64(n/20) < 1000 {
				size := c.MemoryUsage(ctx, s.key("m"), 0).Val()
				least, most = min(least, size), max(most, size)
			}
		}
		if d := peek(t, s, "m", p); d.Limits[0].Used != int64(n-1) { // the last charge was a tick ago
			t.Fatalf("the window holds %d, want %d: not the steady state", d.Limits[0].Used, n-1)
		}
		perEntry := float64(most) / float64(n)
		t.Logf("%9d %12d %12d %9.1f", n, least, most, perEntry)
		if perEntry > 16 {
			t.Errorf("%d entries in the steady state: up to %.1f bytes an entry, want at most 16", n, perEntry)
		}
	}
}
