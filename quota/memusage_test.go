package quota

import (
	"context"
	"testing"
	"time"
)

// The README's bytes-per-entry figures come from this test:
//
//	go test ./quota -run TestMemoryPerEntry -v
//
// It fails if an in-window entry costs more than the bound: members are kept
// short (8 bytes for most charges: see memberOf) so that a busy identity
// stays cheap.
func TestMemoryPerEntry(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	for _, tc := range []struct {
		entries  int
		maxBytes float64
	}{
		{10, 60},
		{1_000, 110},
		{100_000, 115},
	} {
		var tick int64
		s := NewRedis(c, WithPrefix(testPrefix(t)), WithClock(func() time.Time {
			tick++
			return epoch.Add(time.Duration(tick) * time.Millisecond)
		}))
		p := mustPlan(t, "mem", Limit{Name: "day", Max: 1 << 30, Window: 24 * time.Hour})
		// Pipelined, or 100,000 round trips would make the test slow.
		keys := s.keys("m")
		if err := chargeScript.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
		for done := 0; done < tc.entries; {
			pipe := c.Pipeline()
			for ; done < tc.entries && pipe.Len() < 1000; done++ {
				chargeScript.EvalSha(ctx, pipe, keys[:], s.chargeArgs(p, 1+tick%9, true)...)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var total int64
		for _, k := range keys { // the log and the state
			total += c.MemoryUsage(ctx, k, 0).Val()
		}
		if n := c.ZCard(ctx, keys[0]).Val(); n != int64(tc.entries) {
			t.Fatalf("log holds %d entries, want %d", n, tc.entries)
		}
		perEntry := float64(total) / float64(tc.entries)
		t.Logf("%7d entries: %9d bytes, %.1f bytes per entry", tc.entries, total, perEntry)
		if perEntry > tc.maxBytes {
			t.Errorf("%d entries: %.1f bytes per entry, want at most %.0f", tc.entries, perEntry, tc.maxBytes)
		}
		if err := s.Reset(ctx, "m"); err != nil {
			t.Fatal(err)
		}
	}
}
