package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/quotatest/faultproxy"
	"github.com/tileapi/tileapi/quota/redisbatch"
)

// slowGeofence is a real in-memory geofence whose Contains waits until
// end: a slow query, to hold requests in flight.
type slowGeofence struct {
	*geofence.Memory
	release  chan struct{}
	once     sync.Once
	inFlight atomic.Int64
}

func newSlowGeofence(t *testing.T) *slowGeofence {
	return &slowGeofence{Memory: geofence.NewMemory(memoryDataset(t)), release: make(chan struct{})}
}

// end lets every request in Contains, and every later one, through.
func (g *slowGeofence) end() { g.once.Do(func() { close(g.release) }) }

func (g *slowGeofence) Contains(ctx context.Context, q geofence.ContainsQuery) ([]dataset.Fence, error) {
	g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Memory.Contains(ctx, q)
}

// waitInFlight waits until n requests are inside g.
func (g *slowGeofence) waitInFlight(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); g.inFlight.Load() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests in flight, want %d", g.inFlight.Load(), n)
		}
	}
}

// A plan's in-flight limit holds across servers that share a Redis: slow
// requests held by one server refuse more on another with a 429
// concurrency-exceeded, for as long as the first renews its leases; once
// that server dies, its slots come free within a lease time.
func TestInFlightAcrossServers(t *testing.T) {
	const lease = 400 * time.Millisecond
	url := testenv.RedisURL(t)
	prefix := "inflight-http:" + time.Now().Format("150405.000000000") + ":"
	serverOn := func(rdb *redis.Client, g Geofence) *env {
		return newEnv(t, with(func(c *Config) {
			c.Quota = quota.NewRedis(rdb, quota.WithPrefix(prefix))
			c.InFlight = inflight.NewRedis(rdb, inflight.WithPrefix(prefix+"f:"), inflight.WithLease(lease))
			c.Geofence = g
		}))
	}
	dying, healthy := quotatest.NewClient(t, url), quotatest.NewClient(t, url)
	slow := newSlowGeofence(t)
	a := serverOn(dying, slow)
	b := serverOn(healthy, geofence.NewMemory(memoryDataset(t)))

	var wg sync.WaitGroup
	// Cleanups run last first: let the slow requests end, wait for them,
	// and only then close the servers.
	t.Cleanup(wg.Wait)
	t.Cleanup(slow.end)
	for range 2 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, a.srv.URL+contains, nil)
			req.Header.Set("X-API-Key", "key-two")
			if resp, err := a.srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	slow.waitInFlight(t, 2)

	refused := func(when string) {
		t.Helper()
		var p problem
		resp := b.get(t, contains, key("two")...)
		decode(t, resp, http.StatusTooManyRequests, &p)
		if p.Code != "concurrency-exceeded" || p.Limit != "in-flight" || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s: %+v, Retry-After %q", when, p, resp.Header.Get("Retry-After"))
		}
	}
	refused("two slow requests on another server")
	// The holder renews: once Redis's clock has passed the end of the
	// leases as first taken, and again three lease times on, the slots
	// are still held.
	leases := leasesOf(t, healthy, prefix+"f:")
	for range 3 {
		leases.reach(t, leases.last(t))
		refused("past the end the leases had")
	}
	if u := b.used(t, key("two")...); u[0] != 2 {
		t.Errorf("used %v: the refusals must not be charged", u)
	}

	dying.Close() // the holder dies: no renewal, no release
	leases.reach(t, leases.last(t))
	if resp := b.get(t, contains, key("two")...); resp.StatusCode != 200 {
		t.Errorf("once Redis's clock passed the end of the dead holder's leases: status %d", resp.StatusCode)
	}
}

// leaseSet is the one set of in-flight leases under a prefix, read from
// Redis: when each ends, in milliseconds of Redis's clock.
type leaseSet struct {
	rdb *redis.Client
	key string
}

func leasesOf(t *testing.T, rdb *redis.Client, prefix string) leaseSet {
	t.Helper()
	ks, err := rdb.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(ks) != 1 {
		t.Fatalf("in-flight leases under %s: keys %v, %v; want one set", prefix, ks, err)
	}
	return leaseSet{rdb: rdb, key: ks[0]}
}

// last returns when the last lease ends.
func (l leaseSet) last(t *testing.T) int64 {
	t.Helper()
	zs, err := l.rdb.ZRangeWithScores(context.Background(), l.key, -1, -1).Result()
	if err != nil || len(zs) != 1 {
		t.Fatalf("the last lease of %s: %v, %v", l.key, zs, err)
	}
	return int64(zs[0].Score)
}

// reach polls until Redis's clock is past ms, when a lease ending at ms
// has ended.
func (l leaseSet) reach(t *testing.T, ms int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		now, err := l.rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.UnixMilli() > ms {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis's clock has not passed %d in 10 s: it reads %d", ms, now.UnixMilli())
		}
	}
}

// In one process the limit is held in memory; a slot comes back when its
// request ends.
func TestInFlightMemory(t *testing.T) {
	slow := newSlowGeofence(t)
	e := newEnv(t, with(func(c *Config) { c.Geofence = slow }))
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(slow.end)
	for range 2 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+contains, nil)
			req.Header.Set("X-API-Key", "key-two")
			if resp, err := e.srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	slow.waitInFlight(t, 2)
	var p problem
	decode(t, e.get(t, "/v1/tiles", key("two")...), http.StatusTooManyRequests, &p)
	if p.Code != "concurrency-exceeded" {
		t.Errorf("third request: %+v", p)
	}
	// Another key has its own slots.
	if resp := e.get(t, "/v1/tiles", key("std")...); resp.StatusCode != 200 {
		t.Errorf("another key: status %d", resp.StatusCode)
	}
	slow.end()
	wg.Wait()
	if resp := e.get(t, "/v1/tiles", key("two")...); resp.StatusCode != 200 {
		t.Errorf("after the slow requests ended: status %d", resp.StatusCode)
	}
}

// A Redis that stalls leaves a key no slot taken for it: the acquires it
// runs after their callers gave up take none, and the releases it missed
// are made once it answers. 8 sequential clients of a key with 8 slots
// meet no concurrency-exceeded in the lease after Redis resumes.
func TestInFlightAfterStall(t *testing.T) {
	const (
		slots   = 8
		lease   = 1500 * time.Millisecond
		stall   = time.Second
		budget  = 100 * time.Millisecond
		warmups = 200 // requests served before the stall
	)
	redisSrv := quotatest.StartRedisServer(t)
	// As serve opens it: no retries, deadlines on every read and write,
	// commands batched.
	rdb := quotatest.NewClient(t, redisSrv.URL())
	redisbatch.Enable(rdb)
	ps, err := plans.Parse([]byte(fmt.Sprintf(`{"plans": [{"name": "two", "max_radius_m": 20000, "max_in_flight": %d,
		"limits": [{"name": "minute", "max": 1000000000, "window": "1m"}]}]}`, slots)))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, with(func(c *Config) {
		c.Plans, c.QuotaTimeout = ps, budget
		c.Quota = quota.NewRedis(rdb)
		c.InFlight = inflight.NewRedis(rdb, inflight.WithLease(lease))
	}))

	type outcome struct {
		start, end time.Time
		got        string // status and problem code, or X-Quota-Status
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		served   atomic.Int64
		stop     = make(chan struct{})
		stopped  sync.Once
		warm     = make(chan struct{})
		wg       sync.WaitGroup
	)
	halt := func() { stopped.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(halt)
	for range slots {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := outcome{start: time.Now()}
				req, _ := http.NewRequest(http.MethodGet, e.srv.URL+contains, nil)
				req.Header.Set("X-API-Key", "key-two")
				resp, err := e.srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var p problem
				_ = json.NewDecoder(resp.Body).Decode(&p)
				resp.Body.Close()
				o.end = time.Now()
				o.got = fmt.Sprintf("%d %s", resp.StatusCode, cmp.Or(p.Code, resp.Header.Get(headerStatus)))
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if served.Add(1) == warmups {
					close(warm)
				}
			}
		})
	}
	<-warm
	stalled := time.Now()
	redisSrv.Hang(t)
	time.Sleep(stall)
	redisSrv.Resume()
	resumed := time.Now()
	time.Sleep(lease)
	halt()

	during, after := map[string]int{}, map[string]int{}
	for _, o := range outcomes {
		switch {
		case o.start.After(resumed) && o.start.Before(resumed.Add(lease)):
			after[o.got]++
		case o.end.After(stalled) && o.start.Before(resumed):
			during[o.got]++
		}
	}
	t.Logf("during the stall: %v; in the lease after it: %v", during, after)
	if during["200 "+statusCharged] == sumOf(during) {
		t.Errorf("every request during the stall was charged: it did not take effect")
	}
	if n := after["429 concurrency-exceeded"]; n > 0 {
		t.Errorf("%d of %d requests in the lease after the stall refused concurrency-exceeded", n, sumOf(after))
	}
	if after["200 "+statusCharged] == 0 {
		t.Errorf("no request charged after the stall")
	}
}

// A release that Redis did not get is retried in the background: another
// server has the slots again once Redis answers, with no more requests on
// the server that held them and long before their lease runs out.
func TestInFlightReleaseRetried(t *testing.T) {
	const lease = time.Minute
	redisSrv := quotatest.StartRedisServer(t)
	proxy, err := faultproxy.Start(redisSrv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	prefix := "inflight-retried:"
	serverOn := func(addr string, g Geofence) *env {
		rdb := quotatest.NewClient(t, "redis://"+addr)
		return newEnv(t, with(func(c *Config) {
			c.QuotaTimeout = 100 * time.Millisecond
			c.Quota = quota.NewRedis(rdb, quota.WithPrefix(prefix))
			c.InFlight = inflight.NewRedis(rdb, inflight.WithPrefix(prefix+"f:"), inflight.WithLease(lease))
			c.Geofence = g
		}))
	}
	slow := newSlowGeofence(t)
	a := serverOn(proxy.Addr(), slow)
	b := serverOn(redisSrv.Addr, geofence.NewMemory(memoryDataset(t)))

	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(slow.end)
	for range 2 { // both of plan two's slots
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, a.srv.URL+contains, nil)
			req.Header.Set("X-API-Key", "key-two")
			if resp, err := a.srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	slow.waitInFlight(t, 2)
	if resp := b.get(t, contains, key("two")...); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("with both slots held on the other server: status %d", resp.StatusCode)
	}
	// The requests end while nothing reaches Redis: their releases, sent
	// in the background, fail.
	proxy.BlackHole()
	slow.end()
	wg.Wait()
	time.Sleep(1500 * time.Millisecond) // a send of the releases times out
	if resp := b.get(t, contains, key("two")...); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("with the releases lost: status %d, want the slots still held", resp.StatusCode)
	}
	proxy.Restore()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp := b.get(t, contains, key("two")...)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after Redis answers again, the slots released while it did not are still held (status %d); the lease is %v", resp.StatusCode, lease)
		}
	}
}

func sumOf(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// heldReleases holds up every pipeline that carries a ZREM (the
// background release of in-flight slots) until open is closed.
type heldReleases struct{ open chan struct{} }

func (h heldReleases) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h heldReleases) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h heldReleases) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "zrem" {
				<-h.open
				break
			}
		}
		return next(ctx, cmds)
	}
}

// A request of a plan with an in-flight limit makes one round trip on its
// client's path in Redis mode: the charge's script takes the slot (with a
// tile's cache lookup in the same trip), and the release goes behind the
// answer. Held up here until the end, the releases keep no answer waiting,
// and a client that sends its requests one after another, on a plan of
// two slots, is never refused: its next charge gives its last slot back.
func TestInFlightRoundTrips(t *testing.T) {
	t.Run("single node", func(t *testing.T) {
		testInFlightRoundTrips(t, quotatest.NewClient(t, testenv.RedisURL(t)))
	})
	t.Run("cluster", func(t *testing.T) {
		testInFlightRoundTrips(t, quotatest.NewClusterClient(t, quotatest.RedisClusterAddrs(t)))
	})
}

func testInFlightRoundTrips(t *testing.T, rdb redis.UniversalClient) {
	held := heldReleases{open: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-held.open:
		default:
			close(held.open)
		}
	})
	rdb.AddHook(held)
	log := &tripLog{}
	rdb.AddHook(log)
	prefix := fmt.Sprintf("httpapitest:%d:%s:", time.Now().UnixNano(), t.Name())
	e := newEnv(t, with(func(c *Config) {
		c.Quota = quota.NewRedis(rdb, quota.WithPrefix(prefix))
		c.InFlight = inflight.NewRedis(rdb, inflight.WithPrefix(prefix+"f:"))
		c.TileCache = tilecache.NewRedis(rdb, prefix+"tile:", time.Minute)
	}))
	// Load the script (a first FCALL finds the library missing, which it loads).
	if resp := e.get(t, contains, key("two")...); resp.StatusCode != 200 {
		t.Fatalf("first request: status %d", resp.StatusCode)
	}
	log.until(t, count(1))
	for i, tc := range []struct{ path, onPath string }{
		{contains, "fcall"},
		{contains, "fcall"},
		{"/v1/tiles/places/2/2/1.mvt", "fcall+get"},
		{contains, "fcall"},
	} {
		resp := e.get(t, tc.path, key("two")...)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d of one client, one after another, on 2 slots: status %d", i, resp.StatusCode)
		}
		trips := log.until(t, count(1))
		if trips[0] != tc.onPath || slices.Contains(trips, "zrem") {
			t.Errorf("request %d (%s): round trips %q before its release, want %q first and no zrem", i, tc.path, trips, tc.onPath)
		}
	}
	close(held.open)
	log.until(t, func(ts []string) bool { return slices.Contains(ts, "zrem") })
}
