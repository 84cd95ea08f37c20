package quota

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The benchmarks against other limiters (quota's Redis store against
// go-redis/redis_rate, the gate against go-chi/httprate) are in tileapi's
// internal/enginebench, so that this module requires neither.

// BenchmarkMemoryDecision measures one admitted decision of the in-process
// store with 1,000, 100,000 and 1,000,000 charges in the window, one in and
// one out a call: the time per decision stays flat, as no decision copies
// the log.
//
//	go test ./quota -run '^$' -bench MemoryDecision -benchmem
func BenchmarkMemoryDecision(b *testing.B) {
	ctx := context.Background()
	for _, entries := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			var tick int64
			m := NewMemory(func() time.Time { return time.UnixMicro(1_800_000_000_000_000 + tick) })
			// A window of exactly entries microseconds, a charge each one.
			p := mustPlan(b, "flat", Limit{Name: "w", Max: MaxUnits, Window: time.Duration(entries) * time.Microsecond})
			charge := func() {
				tick++
				if d, err := m.Charge(ctx, "id", p, 1); err != nil || !d.Allowed || d.Limits[0].Used != int64(min(int(tick), entries)) {
					b.Fatalf("charge %d: %+v, %v", tick, d.Limits, err)
				}
			}
			for range entries {
				charge()
			}
			b.ReportAllocs()
			for b.Loop() {
				charge()
			}
		})
	}
}
