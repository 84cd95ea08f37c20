package inflight

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/quotatest/faultproxy"
)

func TestMain(m *testing.M) { os.Exit(quotatest.Main(m)) }

// limiter is what Redis and Memory share.
type limiter interface {
	Acquire(ctx context.Context, identity string, max int) (Lease, *Denial, error)
	Renew(ctx context.Context, l Lease) (bool, error)
	Release(ctx context.Context, l Lease) error
}

var (
	_ limiter = (*Redis)(nil)
	_ limiter = (*Memory)(nil)
)

// servers returns n limiters that share one store, as n servers would.
type kind struct {
	name    string
	servers func(t *testing.T, n int, lease time.Duration) []limiter
}

func kinds() []kind {
	redisServers := func(open func(t *testing.T) redis.UniversalClient) func(*testing.T, int, time.Duration) []limiter {
		return func(t *testing.T, n int, lease time.Duration) []limiter {
			var ls []limiter
			prefix := fmt.Sprintf("inflighttest:%d:", time.Now().UnixNano()) // one fleet
			for range n {
				ls = append(ls, NewRedis(open(t), WithLease(lease), WithPrefix(prefix)))
			}
			return ls
		}
	}
	return []kind{
		{"memory", func(_ *testing.T, n int, _ time.Duration) []limiter {
			m := NewMemory()
			ls := make([]limiter, n)
			for i := range ls {
				ls[i] = m
			}
			return ls
		}},
		{"redis", redisServers(func(t *testing.T) redis.UniversalClient {
			return quotatest.NewClient(t, quotatest.RedisURL(t))
		})},
		{"cluster", redisServers(func(t *testing.T) redis.UniversalClient {
			return quotatest.NewClusterClient(t, quotatest.RedisClusterAddrs(t))
		})},
	}
}

func TestAcquireRelease(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			l := k.servers(t, 1, time.Minute)[0]
			var held []Lease
			for i := range 3 {
				lease, denied, err := l.Acquire(ctx, "key:{1}", 3)
				if err != nil || denied != nil || lease.IsZero() {
					t.Fatalf("acquire %d: %v, %+v, %v", i, lease, denied, err)
				}
				held = append(held, lease)
			}
			_, denied, err := l.Acquire(ctx, "key:{1}", 3)
			if err != nil || denied == nil || denied.Max != 3 || denied.RetryAfter <= 0 {
				t.Fatalf("fourth acquire: %+v, %v; want a denial with a retry time", denied, err)
			}
			// Another identity has its own slots.
			if _, denied, err := l.Acquire(ctx, "key:{2}", 3); err != nil || denied != nil {
				t.Errorf("another identity: %+v, %v", denied, err)
			}
			for range 2 { // twice is harmless
				if err := l.Release(ctx, held[0]); err != nil {
					t.Fatal(err)
				}
			}
			if _, denied, err := l.Acquire(ctx, "key:{1}", 3); err != nil || denied != nil {
				t.Errorf("after a release: %+v, %v", denied, err)
			}
			if _, denied, err := l.Acquire(ctx, "key:{1}", 3); err != nil || denied == nil {
				t.Errorf("full again: %+v, %v", denied, err)
			}
			if _, _, err := l.Acquire(ctx, "", 3); !errors.Is(err, ErrInvalid) {
				t.Errorf("empty identity: %v", err)
			}
			if _, _, err := l.Acquire(ctx, "key:3", 0); !errors.Is(err, ErrInvalid) {
				t.Errorf("max 0: %v", err)
			}
		})
	}
}

// Across several servers, never more than max leases are held at once.
func TestConcurrentLimit(t *testing.T) {
	ctx := context.Background()
	const max = 4
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			servers := k.servers(t, 3, time.Minute)
			var inFlight, peak, served, refused atomic.Int64
			var wg sync.WaitGroup
			deadline := time.Now().Add(time.Second)
			for g := range 24 {
				l := servers[g%len(servers)]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(deadline) {
						lease, denied, err := l.Acquire(ctx, "key:7", max)
						if err != nil {
							t.Error(err)
							return
						}
						if denied != nil {
							refused.Add(1)
							continue
						}
						n := inFlight.Add(1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						time.Sleep(time.Millisecond)
						inFlight.Add(-1)
						served.Add(1)
						if err := l.Release(ctx, lease); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if p := peak.Load(); p > max || p < max {
				t.Errorf("peak %d in flight, want exactly %d (the limit reached, never passed)", p, max)
			}
			if served.Load() == 0 || refused.Load() == 0 {
				t.Errorf("served %d, refused %d: want both", served.Load(), refused.Load())
			}
		})
	}
}

// leaseClock reads, at the Redis node that holds an identity's leases,
// its clock and when the leases end, both in milliseconds of Redis TIME:
// what expires a lease.
type leaseClock struct {
	t    *testing.T
	node redis.Cmdable
	key  string
}

func newLeaseClock(t *testing.T, r *Redis, identity string) *leaseClock {
	t.Helper()
	c := &leaseClock{t: t, node: r.client.(redis.UniversalClient), key: r.key(identity)}
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(context.Background(), c.key)
		if err != nil {
			t.Fatal(err)
		}
		c.node = node
	}
	return c
}

func (c *leaseClock) now() int64 {
	c.t.Helper()
	now, err := c.node.Time(context.Background()).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	return now.UnixMilli()
}

// end returns when lease l ends, or -1 once Redis holds it no more.
func (c *leaseClock) end(l Lease) int64 {
	c.t.Helper()
	end, err := c.node.ZScore(context.Background(), c.key, l.id).Result()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return int64(end)
}

// last returns when the last lease held ends.
func (c *leaseClock) last() int64 {
	c.t.Helper()
	zs, err := c.node.ZRangeWithScores(context.Background(), c.key, -1, -1).Result()
	if err != nil || len(zs) != 1 {
		c.t.Fatalf("the last lease of %s: %v, %v", c.key, zs, err)
	}
	return int64(zs[0].Score)
}

// reach polls until Redis's clock reaches ms.
func (c *leaseClock) reach(ms int64) {
	c.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.now() < ms; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("Redis's clock has not reached %d in 10 s: it reads %d", ms, c.now())
		}
	}
}

// The slots of a server that dies come free when their leases end, by
// Redis's clock, at most a lease time after they were taken; a lease
// renewed in time lives on, and one renewed once it has ended is not
// brought back. The test waits on Redis's clock, polling, not on sleeps.
func TestLeasesExpire(t *testing.T) {
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	for _, k := range kinds()[1:] {
		t.Run(k.name, func(t *testing.T) {
			servers := k.servers(t, 2, lease)
			dead, alive := servers[0], servers[1]
			clock := newLeaseClock(t, alive.(*Redis), "key:9")
			for range 2 {
				if _, denied, err := dead.Acquire(ctx, "key:9", 2); err != nil || denied != nil {
					t.Fatal(denied, err)
				}
			}
			ends, taken := clock.last(), clock.now()
			if ends > taken+lease.Milliseconds() {
				t.Errorf("a lease taken by %d ends at %d, more than a lease (%v) later", taken, ends, lease)
			}
			if _, denied, _ := alive.Acquire(ctx, "key:9", 2); denied == nil || denied.RetryAfter > lease {
				t.Fatalf("with both slots held: %+v, want a denial within the lease", denied)
			}
			clock.reach(ends)
			kept, denied, err := alive.Acquire(ctx, "key:9", 2)
			if err != nil || denied != nil {
				t.Fatalf("once the dead server's leases ended: %+v, %v", denied, err)
			}
			// Renewed all along, it outlives three leases, each renewal
			// ending it a lease from Redis's now.
			for start := clock.now(); clock.now() < start+3*lease.Milliseconds(); time.Sleep(10 * time.Millisecond) {
				before := clock.now()
				if ok, err := alive.Renew(ctx, kept); !ok || err != nil {
					t.Fatalf("renew: %v, %v", ok, err)
				}
				if end := clock.end(kept); end < before+lease.Milliseconds() {
					t.Fatalf("renewed at %d or after, the lease ends at %d: less than a lease (%v) on", before, end, lease)
				}
			}
			late, denied, err := alive.Acquire(ctx, "key:9", 2)
			if err != nil || denied != nil {
				t.Fatalf("the second slot: %+v, %v", denied, err)
			}
			clock.reach(clock.end(late))
			if ok, err := alive.Renew(ctx, late); ok || err != nil {
				t.Errorf("renew once the lease ended: %v, %v; want false", ok, err)
			}
			if ttl := clock.node.PTTL(ctx, clock.key).Val(); ttl > lease {
				t.Errorf("key TTL %s, want at most a lease", ttl)
			}
		})
	}
}

// The identity is the hash tag, braces and all.
func TestHashTag(t *testing.T) {
	r := NewRedis(nil)
	for _, id := range []string{"key:1", "key:{1}", "ip:2001:db8::/64"} {
		k := r.key(id)
		open, close := 0, 0
		for _, c := range k {
			switch c {
			case '{':
				open++
			case '}':
				close++
			}
		}
		if open != 1 || close != 1 {
			t.Errorf("key(%q) = %q: want exactly one hash tag", id, k)
		}
	}
	// Escaping is one to one: an identity spelling another's escape has
	// a lease set of its own.
	if a, b := r.key("a{b"), r.key("a%7Bb"); a == b {
		t.Errorf("identities a{b and a%%7Bb share the key %q", a)
	}
}

// served opens a client of the Redis at addr as tileapi serve does: no
// retries, the context's deadline on every read and write.
func served(t *testing.T, addr string) *redis.Client {
	t.Helper()
	return quotatest.NewClient(t, "redis://"+addr)
}

// held returns how many leases of identity Redis at addr holds, read
// beside the limiter under test.
func held(t *testing.T, addr string, r *Redis, identity string) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	n, err := c.ZCard(context.Background(), r.key(identity)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// scriptCalls returns how many scripts Redis at addr has run.
func scriptCalls(t *testing.T, addr string) int64 { return commandCalls(t, addr, "evalsha") }

// commandCalls returns how many times Redis at addr has run the command
// name (lower case, as INFO commandstats names it).
func commandCalls(t *testing.T, addr, name string) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// An acquire that Redis runs only after its caller's deadline, in Redis
// time, takes no slot: a Redis that stalls and then runs what was sent to
// it gives nothing to callers that gave up.
func TestAcquireLate(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	r := NewRedis(served(t, srv.Addr), WithLease(time.Minute))
	// A first acquire loads the script and tells how far Redis's clock is.
	first, _, err := r.Acquire(ctx, "key:1", 1)
	if err != nil || r.Release(ctx, first) != nil {
		t.Fatal(err)
	}
	ran := scriptCalls(t, srv.Addr)

	srv.Hang(t)
	actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _, err = r.Acquire(actx, "key:1", 1)
	cancel()
	if err == nil {
		t.Fatal("an acquire with Redis stopped succeeded")
	}
	srv.Resume()
	for deadline := time.Now().Add(5 * time.Second); scriptCalls(t, srv.Addr) == ran; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not run the acquire sent while it was stopped")
		}
	}
	if n := held(t, srv.Addr, r, "key:1"); n != 0 {
		t.Errorf("Redis holds %d leases after running an acquire past its deadline, want 0", n)
	}

	// Slowed on its way in, an acquire reaches Redis after its deadline
	// but is answered in time: ErrLate, and no slot.
	p, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	slowed := NewRedis(served(t, p.Addr()), WithLease(time.Minute))
	if _, _, err := slowed.Acquire(ctx, "key:2", 1); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(100*time.Millisecond, 0)
	actx, cancel = context.WithTimeout(ctx, 150*time.Millisecond) // the script's deadline: 75 ms from now
	defer cancel()
	if _, _, err := slowed.Acquire(actx, "key:2", 2); !errors.Is(err, ErrLate) {
		t.Errorf("an acquire that reached Redis after its deadline: %v, want ErrLate", err)
	}
	if n := held(t, srv.Addr, r, "key:2"); n != 1 {
		t.Errorf("Redis holds %d leases, want the 1 taken before", n)
	}
}

// A release that fails is made again once Redis answers: in the
// background, and with the identity's next acquire or release, in the same
// round trip. The slot is free again as soon as Redis answers, not a lease
// time later.
func TestReleaseRetried(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	p, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r := NewRedis(served(t, p.Addr()), WithLease(time.Minute))
	acquire := func(t *testing.T, identity string) Lease {
		t.Helper()
		l, denied, err := r.Acquire(ctx, identity, 2)
		if err != nil || denied != nil {
			t.Fatalf("acquire: %+v, %v", denied, err)
		}
		return l
	}
	// lost releases l while nothing reaches Redis.
	lost := func(t *testing.T, l Lease) {
		t.Helper()
		p.BlackHole()
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := r.Release(rctx, l); err == nil {
			t.Fatal("a release through a black hole succeeded")
		}
		if n := held(t, srv.Addr, r, l.identity); n != 2 {
			t.Fatalf("Redis holds %d leases after the lost release, want 2", n)
		}
		p.Restore()
	}
	// busy keeps the background sends from running, as if one were out:
	// what is made is the next call's.
	busy := func(t *testing.T) {
		r.pending.mu.Lock()
		r.pending.sending = true
		r.pending.mu.Unlock()
		t.Cleanup(func() {
			r.pending.mu.Lock()
			r.pending.sending = false
			r.pending.mu.Unlock()
		})
	}
	t.Run("in the background", func(t *testing.T) {
		a := acquire(t, "key:c")
		acquire(t, "key:c")
		lost(t, a)
		for deadline := time.Now().Add(5 * time.Second); held(t, srv.Addr, r, "key:c") != 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the lost release was not made 5 s after Redis answers again")
			}
		}
	})
	t.Run("next acquire", func(t *testing.T) {
		busy(t)
		a := acquire(t, "key:a")
		acquire(t, "key:a")
		lost(t, a)
		acquire(t, "key:a") // a's slot, given back first
		if n := held(t, srv.Addr, r, "key:a"); n != 2 {
			t.Errorf("Redis holds %d leases, want 2", n)
		}
	})
	t.Run("next release", func(t *testing.T) {
		busy(t)
		a, b := acquire(t, "key:b"), acquire(t, "key:b")
		lost(t, a)
		if err := r.Release(ctx, b); err != nil {
			t.Fatal(err)
		}
		if n := held(t, srv.Addr, r, "key:b"); n != 0 {
			t.Errorf("Redis holds %d leases after the next release, want 0", n)
		}
	})
}

// Failed releases are kept up to a bound, oldest dropped first and counted,
// and until their lease would have expired.
func TestPendingBounded(t *testing.T) {
	var p pending
	for i := range maxPending + 1 {
		p.add(Lease{identity: "key:1", id: strconv.Itoa(i)}, time.Minute, time.Time{})
	}
	if p.dropped != 1 || len(p.queue) != maxPending || p.queue[0].id != "1" {
		t.Errorf("%d dropped, %d kept from %q; want 1 dropped, %d kept from \"1\"", p.dropped, len(p.queue), p.queue[0].id, maxPending)
	}
	if ids := p.of("key:1"); len(ids) != maxPendingPerCall {
		t.Errorf("a call carries %d releases, want %d", len(ids), maxPendingPerCall)
	}
	p.done("key:1", p.of("key:1"), time.Now())
	if len(p.queue) != maxPending-maxPendingPerCall {
		t.Errorf("%d kept after a call, want %d", len(p.queue), maxPending-maxPendingPerCall)
	}
	var q pending
	q.add(Lease{identity: "key:2", id: "expired"}, 0, time.Time{})
	if ids := q.of("key:2"); len(ids) != 0 {
		t.Errorf("an expired lease is still released: %v", ids)
	}
}

// The release of a slot whose charge or acquire failed, which Redis may
// still take until the call's deadline, is carried by calls before then,
// but forgotten only once one sent after it has made it: a release that
// Redis ran before that script would free nothing.
func TestPendingDue(t *testing.T) {
	var p pending
	due := time.Now().Add(time.Hour)
	p.add(Lease{identity: "key:1", id: "unknown"}, 2*time.Hour, due)
	if ids := p.of("key:1"); len(ids) != 1 {
		t.Fatalf("a call carries %v, want the release not yet due", ids)
	}
	if owed, next := p.all(); owed != nil || !next.Equal(due) {
		t.Errorf("the sender is given %v, next at %v; want nothing before %v", owed, next, due)
	}
	p.done("key:1", []string{"unknown"}, time.Now())
	if len(p.queue) != 1 {
		t.Fatal("a release made before it was due was forgotten")
	}
	p.done("key:1", []string{"unknown"}, due.Add(time.Millisecond))
	if len(p.queue) != 0 {
		t.Error("a release made after it was due is still owed")
	}
}
