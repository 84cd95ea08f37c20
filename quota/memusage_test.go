package quota

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/internal/redislayout"
)

var memusageMax = flag.Int("memusage.max", 102_000, "the most entries TestMemoryPerEntry and TestMemoryPerEntrySteadyState put in a window")

// The bytes-per-entry figures of docs/benchmarks.md come from this test:
//
//	go test ./quota -run TestMemoryPerEntry -v -memusage.max 1000000
//
// It fills one identity's log through the charge script, and beside it the
// layout before version 3 (a sorted set of 8-byte members scored by admit
// time, and a state string of 56 bytes, built here only to be measured),
// and reports MEMORY USAGE ... SAMPLES 0 of each divided by its entries. It
// fails if an in-window entry of the log costs more than the bound: 16
// bytes from 100,000 entries on. A string that grows at its end below 1 MB
// doubles its allocation, so a record of 9 bytes costs from 9 to 18, and
// the key and header weigh on few entries.
func TestMemoryPerEntry(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	t.Logf("%9s %14s %9s %14s %9s", "entries", "log bytes", "per entry", "old bytes", "per entry")
	for _, tc := range []struct {
		entries  int
		maxBytes float64
	}{
		{10, 50},
		{1_000, 24},
		{100_000, 16},
		{1_000_000, 16},
	} {
		if tc.entries > *memusageMax {
			continue
		}
		prefix := testPrefix(t)
		var tick int64
		s := NewRedis(c, WithPrefix(prefix), withClock(func() time.Time {
			tick++
			return epoch.Add(time.Duration(tick) * time.Millisecond)
		}))
		p := mustPlan(t, "mem", Limit{Name: "day", Max: 1 << 30, Window: 24 * time.Hour})
		if err := loadLibrary(t, c); err != nil {
			t.Fatal(err)
		}
		oldLog, oldState := prefix+"old:l2", prefix+"old:s2"
		t.Cleanup(func() { c.Del(context.Background(), s.key("m"), oldLog, oldState) })
		// Pipelined, or a million round trips would make the test slow.
		for done := 0; done < tc.entries; {
			pipe := c.Pipeline()
			members := make([]redis.Z, 0, 1000)
			for ; done < tc.entries && pipe.Len() < 1000; done++ {
				cost := 1 + tick%9
				keys, args := s.chargeArgs(&chargeCall{identity: "m", plan: p, cost: cost, record: true})
				s.queueScript(ctx, pipe, chargeFn, keys, args...)
				at := epoch.Add(time.Duration(tick) * time.Millisecond).UnixMicro()
				members = append(members, redis.Z{Score: float64(at), Member: oldMember(at, cost)})
			}
			pipe.ZAdd(ctx, oldLog, members...)
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.Set(ctx, oldState, make([]byte, 56), 0)
		entries, err := redislayout.Read(ctx, c, s.key("m"))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != tc.entries {
			t.Fatalf("log holds %d entries, want %d", len(entries), tc.entries)
		}
		size := c.MemoryUsage(ctx, s.key("m"), 0).Val()
		old := c.MemoryUsage(ctx, oldLog, 0).Val() + c.MemoryUsage(ctx, oldState, 0).Val()
		perEntry := float64(size) / float64(tc.entries)
		t.Logf("%9d %14d %9.1f %14d %9.1f", tc.entries, size, perEntry, old, float64(old)/float64(tc.entries))
		if perEntry > tc.maxBytes {
			t.Errorf("%d entries: %.1f bytes per entry, want at most %.0f", tc.entries, perEntry, tc.maxBytes)
		}
	}
}

// oldMember is a log member of layout 2: the admit time in 7 bytes, then
// the cost in as few bytes as hold it.
func oldMember(at, cost int64) string {
	b := make([]byte, 0, 13)
	for i := 6; i >= 0; i-- {
		b = append(b, byte(at>>(8*i)))
	}
	for size := 1; ; size++ {
		if size == 6 || cost < 1<<(8*size) {
			for i := size - 1; i >= 0; i-- {
				b = append(b, byte(cost>>(8*i)))
			}
			return string(b)
		}
	}
}
