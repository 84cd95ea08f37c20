package inflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// holder is what Redis and Memory share for slots taken with a charge.
type holder interface {
	Hold(store Store, identity string, max int) *Held
}

// holdServer is one server's slots and quota store, sharing a fleet's.
type holdServer struct {
	holder holder
	store  Store
}

// holdKind makes n servers that share their slots and quota, and reads
// how many slots of identity are held.
type holdKind struct {
	name    string
	servers func(t *testing.T, n int, lease time.Duration) []holdServer
	held    func(t *testing.T, s holdServer, identity string) int64
}

func holdKinds() []holdKind {
	redisServers := func(open func(t *testing.T) redis.UniversalClient) func(*testing.T, int, time.Duration) []holdServer {
		return func(t *testing.T, n int, lease time.Duration) []holdServer {
			prefix := fmt.Sprintf("holdtest:%d:", time.Now().UnixNano()) // one fleet
			var ss []holdServer
			for i := range n {
				c := open(t)
				q := quota.NewRedis(c, quota.WithPrefix(prefix+"q:"))
				var store Store = q
				if i%2 == 1 {
					store = quota.NewDenyCache(q) // as tileapi serve has it
				}
				ss = append(ss, holdServer{NewRedis(c, WithLease(lease), WithPrefix(prefix+"f:")), store})
			}
			return ss
		}
	}
	redisHeld := func(t *testing.T, s holdServer, identity string) int64 {
		t.Helper()
		r := s.holder.(*Redis)
		n, err := r.client.(interface {
			ZCard(ctx context.Context, key string) *redis.IntCmd
		}).ZCard(context.Background(), r.key(identity)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return []holdKind{
		{"memory", func(_ *testing.T, n int, _ time.Duration) []holdServer {
			m, q := NewMemory(), quota.NewMemory(nil)
			ss := make([]holdServer, n)
			for i := range ss {
				ss[i] = holdServer{m, q}
			}
			return ss
		}, func(_ *testing.T, s holdServer, identity string) int64 {
			m := s.holder.(*Memory)
			m.mu.Lock()
			defer m.mu.Unlock()
			return int64(len(m.held[identity]))
		}},
		{"redis", redisServers(func(t *testing.T) redis.UniversalClient {
			return quotatest.NewClient(t, quotatest.RedisURL(t))
		}), redisHeld},
		{"cluster", redisServers(func(t *testing.T) redis.UniversalClient {
			return quotatest.NewClusterClient(t, quotatest.RedisClusterAddrs(t))
		}), redisHeld},
		// A store that takes no slot in its script: acquired first.
		{"redis, acquired first", func(t *testing.T, n int, lease time.Duration) []holdServer {
			prefix := fmt.Sprintf("holdtest:%d:", time.Now().UnixNano())
			q := quota.NewMemory(nil)
			var ss []holdServer
			for range n {
				ss = append(ss, holdServer{NewRedis(quotatest.NewClient(t, quotatest.RedisURL(t)), WithLease(lease), WithPrefix(prefix)), q})
			}
			return ss
		}, redisHeld},
	}
}

// holdIdentity is a member identity: on a cluster its leases must share
// the slot of its quota keys, which take its group's hash tag.
var holdIdentity = quota.Member("customer:7", "key:42")

func mustPlan(t *testing.T, limits ...quota.Limit) quota.Plan {
	t.Helper()
	p, err := quota.NewPlan("p", limits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Slots taken with charges hold exactly across servers: 32 goroutines over
// two servers (two stores and clients on one Redis, or one cluster) never
// have more than max admitted requests in progress at once, some are
// refused for a slot, and every unit the quota holds is one an admitted
// request was charged: a charge refused for its slot charges nothing.
func TestHoldExact(t *testing.T) {
	const (
		max     = 4
		callers = 32
		rounds  = 20
	)
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			servers := k.servers(t, 2, time.Minute)
			plan := mustPlan(t, quota.PerMinute(1_000_000))
			var (
				now, most, admitted, refused, units atomic.Int64
				wg                                  sync.WaitGroup
			)
			for g := range callers {
				s := servers[g%len(servers)]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range rounds {
						cost := int64(1 + (g+i)%3)
						h := s.holder.Hold(s.store, holdIdentity, max)
						d, err := h.Charge(context.Background(), holdIdentity, plan, cost)
						switch {
						case errors.Is(err, quota.ErrSlotsHeld):
							refused.Add(1)
							continue
						case err != nil || !d.Allowed:
							t.Errorf("charge: %+v, %v", d, err)
							return
						}
						admitted.Add(1)
						units.Add(cost)
						n := now.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(time.Millisecond) // the work
						now.Add(-1)
						h.Release()
					}
				}()
			}
			wg.Wait()
			t.Logf("%d admitted, %d refused for a slot, at most %d in progress", admitted.Load(), refused.Load(), most.Load())
			if most.Load() > max {
				t.Errorf("%d requests in progress at once, want at most %d", most.Load(), max)
			}
			if refused.Load() == 0 {
				t.Errorf("no charge refused for a slot: the test did not contend")
			}
			d, err := servers[0].store.Peek(context.Background(), holdIdentity, plan)
			if err != nil {
				t.Fatal(err)
			}
			if used := d.Limits[0].Used; used != units.Load() {
				t.Errorf("the quota holds %d units, the admitted requests were charged %d", used, units.Load())
			}
			for deadline := time.Now().Add(5 * time.Second); k.held(t, servers[0], holdIdentity) != 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d slots still held 5 s after every request was released", k.held(t, servers[0], holdIdentity))
				}
			}
		})
	}
}

// A charge the quota denies takes no slot, and a charge refused for its
// slot charges nothing, not even part of its cost.
func TestHoldRefusals(t *testing.T) {
	ctx := context.Background()
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			s := k.servers(t, 1, time.Minute)[0]
			plan := mustPlan(t, quota.PerMinute(3))
			first := s.holder.Hold(s.store, holdIdentity, 1)
			if d, err := first.Charge(ctx, holdIdentity, plan, 2); err != nil || !d.Allowed {
				t.Fatalf("first charge: %+v, %v", d, err)
			}
			// The slot is held: a charge that would fit is refused, uncharged.
			var heldErr *quota.SlotsHeldError
			if _, err := s.holder.Hold(s.store, holdIdentity, 1).Charge(ctx, holdIdentity, plan, 1); !errors.As(err, &heldErr) || heldErr.Max != 1 || heldErr.Expires <= 0 {
				t.Fatalf("a charge with every slot held: %v, want a *quota.SlotsHeldError of 1 slot", err)
			}
			if d, _ := s.store.Peek(ctx, holdIdentity, plan); d.Limits[0].Used != 2 {
				t.Errorf("after a charge refused for its slot the quota holds %d units, want 2", d.Limits[0].Used)
			}
			first.Release()
			// Free again: a charge the quota denies takes no slot.
			wait(t, func() bool { return k.held(t, s, holdIdentity) == 0 }, "the released slot is still held")
			denied := s.holder.Hold(s.store, holdIdentity, 1)
			if d, err := denied.Charge(ctx, holdIdentity, plan, 2); err != nil || d.Allowed {
				t.Fatalf("a charge over the quota: %+v, %v; want denied", d, err)
			}
			if !denied.Lease().IsZero() {
				t.Errorf("a denied charge holds the lease %v", denied.Lease())
			}
			// None held at once where the script took none; soon where one
			// acquired first is given back in the background.
			wait(t, func() bool { return k.held(t, s, holdIdentity) == 0 }, "a denied charge holds a slot")
			if d, err := s.holder.Hold(s.store, holdIdentity, 1).Charge(ctx, holdIdentity, plan, 1); err != nil || !d.Allowed {
				t.Errorf("the charge after a denied one: %+v, %v; want admitted, its slot free", d, err)
			}
		})
	}
}

// The slots of a server that dies holding them, never released nor
// renewed, come free within a lease time, and not before.
func TestHoldKilledHolderFreesWithinLease(t *testing.T) {
	const lease = 500 * time.Millisecond
	ctx := context.Background()
	ss := holdKinds()[1].servers(t, 2, lease)
	plan := mustPlan(t, quota.PerMinute(1000))
	taken := time.Now()
	for range 2 {
		if d, err := ss[0].holder.Hold(ss[0].store, "killed", 2).Charge(ctx, "killed", plan, 1); err != nil || !d.Allowed {
			t.Fatalf("charge: %+v, %v", d, err)
		}
	}
	// Server 0 dies: its Held are never released.
	for {
		d, err := ss[1].holder.Hold(ss[1].store, "killed", 2).Charge(ctx, "killed", plan, 1)
		since := time.Since(taken)
		switch {
		case err == nil && d.Allowed:
			if since < lease-50*time.Millisecond { // Redis's clock and ours: a few ms apart
				t.Fatalf("a slot of the dead server came free after %v, before its lease of %v", since, lease)
			}
			return
		case !errors.Is(err, quota.ErrSlotsHeld):
			t.Fatalf("charge: %+v, %v", d, err)
		case since > lease+time.Second:
			t.Fatalf("the dead server's slots are still held %v after they were taken; the lease is %v", since, lease)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A Redis that stalls (SIGSTOP) holds no slot once it answers, past what
// the requests in progress hold: the charges it runs after their callers
// gave up take none, and the releases it missed are made at once, long
// before their leases end.
func TestHoldAfterStall(t *testing.T) {
	const lease = time.Minute
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	r := NewRedis(served(t, srv.Addr), WithLease(lease))
	store := quota.NewRedis(served(t, srv.Addr))
	plan := mustPlan(t, quota.PerMinute(1000))
	charge := func(timeout time.Duration) (*Held, error) {
		h := r.Hold(store, "stalled", 8)
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		d, err := h.Charge(cctx, "stalled", plan, 1)
		if err == nil && !d.Allowed {
			err = errors.New("denied")
		}
		return h, err
	}
	// Warm: the script is loaded and the clocks' offset known.
	var before []*Held
	for range 3 {
		h, err := charge(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, h)
	}
	srv.Hang(t)
	for _, h := range before {
		h.Release() // during the stall: the releases cannot reach Redis
	}
	for i := range 4 {
		if _, err := charge(50 * time.Millisecond); err == nil {
			t.Fatalf("charge %d with Redis stopped succeeded", i)
		}
	}
	time.Sleep(300 * time.Millisecond)
	srv.Resume()
	resumed := time.Now()
	// The stalled charges run now, after their deadlines, taking nothing;
	// the releases are sent again, and none is held.
	for time.Since(resumed) < 5*time.Second && held(t, srv.Addr, r, "stalled") != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if n := held(t, srv.Addr, r, "stalled"); n != 0 {
		t.Fatalf("%d slots held 5 s after the stall, the lease is %v", n, lease)
	}
	t.Logf("no slot held %v after Redis resumed", time.Since(resumed).Round(time.Millisecond))
	// And none is taken later by the charges sent during the stall.
	time.Sleep(200 * time.Millisecond)
	if n := held(t, srv.Addr, r, "stalled"); n != 0 {
		t.Errorf("%d slots held after the stalled charges ran", n)
	}
}

// tripCounter counts the round trips a client makes: a command alone, or
// a pipeline, each one trip; zrem blocks ZREMs until it is closed.
type tripCounter struct {
	mu    sync.Mutex
	trips []string
	zrem  chan struct{}
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() == "zrem" {
			<-c.zrem
		}
		c.add(cmds[0].Name())
		return next(ctx, cmds)
	}
}

func (c *tripCounter) add(name string) {
	if name == "hello" || name == "client" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trips = append(c.trips, name)
}

func (c *tripCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	trips := c.trips
	c.trips = nil
	return trips
}

// Ended leases are looked for only when an identity's slots are all
// held: until then they keep nobody out, and a charge or an acquire spares
// Redis the ZREMRANGEBYSCORE. Once the set is full, the ended ones are
// removed and their slots taken again. Both ways of taking a slot, in the
// charge's script (Hold) and on its own (Acquire), each on a Redis of its
// own, whose command counts are the test's.
func TestEndedLeasesRemovedWhenFull(t *testing.T) {
	const lease = 2 * time.Second // the second lease ends some 0.8 s after the last take
	ctx := context.Background()
	plan := mustPlan(t, quota.PerMinute(1000))
	for _, take := range []struct {
		name string
		take func(r *Redis, store *quota.Redis, identity string) error // takes one slot of 3, never given back
	}{
		{"hold", func(r *Redis, store *quota.Redis, identity string) error {
			d, err := r.Hold(store, identity, 3).Charge(ctx, identity, plan, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("denied: %+v", d)
			}
			return err
		}},
		{"acquire", func(r *Redis, _ *quota.Redis, identity string) error {
			_, denial, err := r.Acquire(ctx, identity, 3)
			if err == nil && denial != nil {
				err = fmt.Errorf("refused: %+v", denial)
			}
			return err
		}},
	} {
		t.Run(take.name, func(t *testing.T) {
			t.Parallel()
			srv := quotatest.StartRedisServer(t) // its own command counts
			c := quotatest.NewClient(t, srv.URL())
			r, store, identity := NewRedis(c, WithLease(lease)), quota.NewRedis(c), "ended"
			held := func() int64 {
				n, err := c.ZCard(ctx, r.key(identity)).Result()
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			// The set lives as long as its newest lease: the first lease
			// ends while the second keeps the set.
			if err := take.take(r, store, identity); err != nil {
				t.Fatal(err)
			}
			taken := time.Now() // the first lease ends by taken + lease
			time.Sleep(lease / 2)
			if err := take.take(r, store, identity); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(taken.Add(lease + lease/10)))
			before := commandCalls(t, srv.Addr, "zremrangebyscore")
			if err := take.take(r, store, identity); err != nil { // 1 ended, 1 held, of 3: not full
				t.Fatal(err)
			}
			if n := commandCalls(t, srv.Addr, "zremrangebyscore") - before; n != 0 || held() != 3 {
				t.Errorf("a slot taken with the set not full: %d ZREMRANGEBYSCORE, %d leases in the set; want 0 and 3", n, held())
			}
			if err := take.take(r, store, identity); err != nil { // full, 1 of them ended: it goes
				t.Fatal(err)
			}
			if n := commandCalls(t, srv.Addr, "zremrangebyscore") - before; n != 1 || held() != 3 {
				t.Errorf("a slot taken with the set full: %d ZREMRANGEBYSCORE, %d leases in the set; want 1 and 3", n, held())
			}

		})
	}
}

// A request with an in-flight limit costs one round trip on its caller's
// path: the charge's script takes the slot, and the release goes in the
// background. A client that waits for each answer before its next request
// finds its slot free on the same server even while the release has not
// reached Redis (held up here): the next charge gives it back first.
func TestHoldOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := quotatest.NewClient(t, quotatest.RedisURL(t))
	trips := &tripCounter{zrem: make(chan struct{})}
	c.AddHook(trips)
	prefix := fmt.Sprintf("holdtrips:%d:", time.Now().UnixNano())
	r := NewRedis(c, WithPrefix(prefix+"f:"))
	store := quota.NewRedis(c, quota.WithPrefix(prefix+"q:"))
	plan := mustPlan(t, quota.PerMinute(1000))
	// Load the library.
	if _, err := store.Charge(ctx, "warm", plan, 1); err != nil {
		t.Fatal(err)
	}
	trips.take()
	for i := range 5 {
		h := r.Hold(store, "sequential", 1)
		if d, err := h.Charge(ctx, "sequential", plan, 1); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
		if got := trips.take(); len(got) != 1 || got[0] != "fcall" {
			t.Fatalf("request %d made the round trips %q on its path, want one fcall", i, got)
		}
		h.Release() // its ZREM waits in the hook
	}
	close(trips.zrem)
	wait(t, func() bool {
		n, err := c.ZCard(ctx, r.key("sequential")).Result()
		return err == nil && n == 0
	}, "the slots are still held once the releases go")
}

func wait(t *testing.T, done func() bool, failure string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !done(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(failure + " after 5 s")
		}
	}
}
