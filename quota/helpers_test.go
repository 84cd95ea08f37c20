package quota

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// store is the method set both stores share; the suite runs against each.
type store = Store

// clock is a settable clock for tests, so windows slide without sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// epoch is where test clocks start: a whole second, far from any edge.
var epoch = time.UnixMilli(1_800_000_000_000)

func newClock() *clock { return &clock{t: epoch} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = epoch.Add(d)
}

// fixture is one store under test with its clock.
type fixture struct {
	name  string
	store store
	clock *clock
}

var prefixSeq atomic.Int64

// testPrefix gives each test its own keys, so tests never need FLUSHDB and
// can share a server with anything else.
func testPrefix(tb testing.TB) string {
	name := strings.NewReplacer("{", "(", "}", ")", " ", "_").Replace(tb.Name())
	return fmt.Sprintf("quotatest:%d:%d:%s:", time.Now().UnixNano(), prefixSeq.Add(1), name)
}

// redisClient and clusterClient are clients of the shared test servers
// with production's options.
func redisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	return quotatest.NewClient(tb, quotatest.RedisURL(tb))
}

func clusterClient(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	return quotatest.NewClusterClient(tb, quotatest.RedisClusterAddrs(tb))
}

// fixtures returns a fresh memory store, Redis store and Redis Cluster
// store, and a Redis store that sends its scripts by EVALSHA as on a
// server without functions, each with its own clock.
func fixtures(t *testing.T) []fixture {
	t.Helper()
	mc, rc, cc, sc := newClock(), newClock(), newClock(), newClock()
	return []fixture{
		{"memory", NewMemory(mc.Now), mc},
		{"redis", NewRedis(redisClient(t), WithPrefix(testPrefix(t)), withClock(rc.Now)), rc},
		{"cluster", NewRedis(clusterClient(t), WithPrefix(testPrefix(t)), withClock(cc.Now)), cc},
		{"redis-scripts", NewRedis(redisClient(t), WithPrefix(testPrefix(t)), withClock(sc.Now), withScriptsOnly()), sc},
	}
}

// withScriptsOnly makes the store send its scripts by EVALSHA from the
// start, as it does once it finds Redis without functions.
func withScriptsOnly() RedisOption { return func(r *Redis) { r.scriptsOnly.Store(true) } }

// eachStore runs f as a subtest against every store.
func eachStore(t *testing.T, f func(t *testing.T, fx fixture)) {
	t.Helper()
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) { f(t, fx) })
	}
}

func mustPlan(tb testing.TB, name string, limits ...Limit) Plan {
	tb.Helper()
	p, err := NewPlan(name, limits...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func charge(tb testing.TB, s store, id string, p Plan, cost int64) Decision {
	tb.Helper()
	d, err := s.Charge(context.Background(), id, p, cost)
	if err != nil {
		tb.Fatalf("Charge(%q, %d): %v", id, cost, err)
	}
	return d
}

func peek(tb testing.TB, s store, id string, p Plan) Decision {
	tb.Helper()
	d, err := s.Peek(context.Background(), id, p)
	if err != nil {
		tb.Fatalf("Peek(%q): %v", id, err)
	}
	return d
}

// used returns the used units of every limit, in plan order.
func used(d Decision) []int64 {
	u := make([]int64, len(d.Limits))
	for i, l := range d.Limits {
		u[i] = l.Used
	}
	return u
}

// serverTarget is a store to test concurrency on, as the servers that
// share it: one Memory, or n Redis stores (one client each, as n servers)
// on each of redisTargets.
type serverTarget struct {
	name    string
	servers func(t *testing.T) []Store
}

// serverTargets returns the Memory target, then each of redisTargets as n
// servers sharing one prefix.
func serverTargets(n int) []serverTarget {
	targets := []serverTarget{{"memory", func(*testing.T) []Store { return []Store{NewMemory(nil)} }}}
	for _, target := range redisTargets {
		targets = append(targets, serverTarget{target.name, func(t *testing.T) []Store {
			prefix := testPrefix(t)
			var ss []Store
			for _, c := range target.clients(t, n) {
				ss = append(ss, NewRedis(c, WithPrefix(prefix)))
			}
			return ss
		}})
	}
	return targets
}

// loadLibrary loads the scripts' library into c, so that pipelined calls
// find it.
func loadLibrary(t *testing.T, c *redis.Client) error {
	t.Helper()
	return NewRedis(c).loadLibrary(context.Background())
}
