package quota

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
)

// benchPerSecond is the limit of the benchmark: a million a second, never
// reached. At 2^30 a second redis_rate's GCRA step (2^-30 s) is lost in the
// rounding of its float clock, so it would write nothing and the baseline
// would be a read (TestBaselineWrites).
const benchPerSecond = 1_000_000

// BenchmarkDecision measures one admitted decision against real Redis, at 1
// and 64 concurrent callers, with go-redis/redis_rate's AllowN (GCRA, the
// best-known Go limiter) as the baseline in the same run:
//
//	go test ./quota -run '^$' -bench Decision -benchmem -count 10 | tee bench.txt
//	benchstat -col /impl bench.txt
//
// Callers spread over 1,000 identities with a limit they never reach, so
// every decision is an admit that writes; the window is one second, so each
// identity's log is in its steady state, one charge in and about one out a
// call. The limit is benchPerSecond for both.
func BenchmarkDecision(b *testing.B) {
	ctx := context.Background()
	c := redisClient(b)
	const identities = 1000
	ids := make([]string, identities)
	for i := range ids {
		ids[i] = "bench-" + strconv.Itoa(i)
	}
	const perSecond = benchPerSecond
	oneLimit := mustPlan(b, "one", PerSecond(perSecond))
	twoLimits := mustPlan(b, "two", Limit{Name: "burst", Max: perSecond, Window: 100 * time.Millisecond}, PerSecond(perSecond))
	rate := redis_rate.NewLimiter(c)
	store1 := NewRedis(c, WithPrefix("bench:tileapi:"))
	store2 := NewRedis(c, WithPrefix("bench:tileapi2:"))

	impls := []struct {
		name   string
		decide func(id string) error
	}{
		{"tileapi", func(id string) error {
			_, err := store1.Charge(ctx, id, oneLimit, 1)
			return err
		}},
		{"redis_rate", func(id string) error {
			_, err := rate.AllowN(ctx, "bench:redis_rate:"+id, redis_rate.PerSecond(perSecond), 1)
			return err
		}},
		{"tileapi-2limits", func(id string) error {
			_, err := store2.Charge(ctx, id, twoLimits, 1)
			return err
		}},
	}
	for _, callers := range []int{1, 64} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("impl=%s/callers=%d", impl.name, callers), func(b *testing.B) {
				b.ReportAllocs()
				var next atomic.Int64
				if callers == 1 {
					for i := 0; b.Loop(); i++ {
						if err := impl.decide(ids[i%identities]); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				// RunParallel starts parallelism x GOMAXPROCS goroutines.
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := impl.decide(ids[next.Add(1)%identities]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// The baseline of BenchmarkDecision records its decisions, as tileapi does:
// at benchPerSecond redis_rate writes its key; at 2^30 a second it does not.
func TestBaselineWrites(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	rate := redis_rate.NewLimiter(c)
	for _, tc := range []struct {
		perSecond int
		writes    bool
	}{{benchPerSecond, true}, {1 << 30, false}} {
		key := testPrefix(t) + strconv.Itoa(tc.perSecond)
		if _, err := rate.AllowN(ctx, key, redis_rate.PerSecond(tc.perSecond), 1); err != nil {
			t.Fatal(err)
		}
		// redis_rate prefixes its keys with "rate:".
		if n := c.Exists(ctx, "rate:"+key).Val(); (n == 1) != tc.writes {
			t.Errorf("redis_rate at %d a second: key written = %v, want %v", tc.perSecond, n == 1, tc.writes)
		}
	}
}

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
