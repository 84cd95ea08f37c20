package enginebench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/redisbatch"
)

// benchPerSecond is the limit of the benchmarks: a million a second, never
// reached. At 2^30 a second redis_rate's GCRA step (2^-30 s) is lost in the
// rounding of its float clock, so it would write nothing and the baseline
// would be a read (TestBaselineWrites).
const benchPerSecond = 1_000_000

// BenchmarkDecision measures one admitted decision against real Redis, at 1
// and 64 concurrent callers, with go-redis/redis_rate's AllowN (GCRA, the
// best-known Go limiter) as the baseline in the same run; tileapi-batched
// is quota on a client whose concurrent calls redisbatch coalesces. Each
// reports its decisions/s and the 99th percentile of a decision's latency
// (p99-µs):
//
//	go test ./internal/enginebench -run '^$' -bench Decision -benchmem -count 10 | tee bench.txt
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
	oneLimit := mustPlan(b, "one", quota.PerSecond(perSecond))
	twoLimits := mustPlan(b, "two", quota.Limit{Name: "burst", Max: perSecond, Window: 100 * time.Millisecond}, quota.PerSecond(perSecond))
	rate := redis_rate.NewLimiter(c)
	store1 := quota.NewRedis(c, quota.WithPrefix("bench:tileapi:"))
	store2 := quota.NewRedis(c, quota.WithPrefix("bench:tileapi2:"))
	batched := redisClient(b)
	batcher := redisbatch.Enable(batched)
	store3 := quota.NewRedis(batched, quota.WithPrefix("bench:tileapi3:"))

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
		{"tileapi-batched", func(id string) error {
			_, err := store3.Charge(ctx, id, oneLimit, 1)
			return err
		}},
	}
	lat := new(latencies) // allocated once: a megabyte
	for _, callers := range []int{1, 64} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("impl=%s/callers=%d", impl.name, callers), func(b *testing.B) {
				b.ReportAllocs()
				var next atomic.Int64
				lat.reset()
				before := batcher.Stats()
				timed := func(id string) error {
					start := time.Now()
					err := impl.decide(id)
					lat.add(time.Since(start))
					return err
				}
				b.ResetTimer()
				start := time.Now()
				defer func() {
					b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
					b.ReportMetric(lat.quantile(0.99), "p99-µs")
					if impl.name == "tileapi-batched" {
						s := batcher.Stats()
						b.ReportMetric(float64(s.RoundTrips-before.RoundTrips)/float64(b.N), "trips/op")
					}
				}()
				if callers == 1 {
					for i := 0; b.Loop(); i++ {
						if err := timed(ids[i%identities]); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				// RunParallel starts parallelism x GOMAXPROCS goroutines.
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := timed(ids[next.Add(1)%identities]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// latencies is a histogram of decision times in whole microseconds, up to
// 100 ms, safe for concurrent use and free of allocations.
type latencies struct{ us [100_001]atomic.Int64 }

func (l *latencies) add(d time.Duration) { l.us[min(d.Microseconds(), 100_000)].Add(1) }

func (l *latencies) reset() {
	for i := range l.us {
		l.us[i].Store(0)
	}
}

// quantile returns the time in microseconds below which the fraction q of
// the decisions took.
func (l *latencies) quantile(q float64) float64 {
	var total int64
	for i := range l.us {
		total += l.us[i].Load()
	}
	want, seen := int64(q*float64(total)), int64(0)
	for i := range l.us {
		if seen += l.us[i].Load(); seen > want {
			return float64(i)
		}
	}
	return 0
}

// The baseline of BenchmarkDecision records its decisions, as quota does:
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

// redisClient is a client of the tests' Redis with production's options.
func redisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	return quotatest.NewClient(tb, quotatest.RedisURL(tb))
}

func mustPlan(tb testing.TB, name string, limits ...quota.Limit) quota.Plan {
	tb.Helper()
	p, err := quota.NewPlan(name, limits...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// testPrefix gives each test keys of its own, so it needs no FLUSHDB and can
// share a server with anything else.
func testPrefix(tb testing.TB) string {
	name := strings.NewReplacer("{", "(", "}", ")", " ", "_").Replace(tb.Name())
	return fmt.Sprintf("enginebench:%d:%s:", time.Now().UnixNano(), name)
}
