package quota

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// roundTrips counts the commands a client sends to Redis.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// A client that keeps charging after a denial costs Redis no round trip
// until its retry time; a cheaper charge, or one after a refund, is asked.
func TestDenyCache(t *testing.T) {
	ctx := context.Background()
	client := redisClient(t)
	trips := &roundTrips{}
	client.AddHook(trips)
	// The cache and the store share a clock that moves only when told.
	clk := newClock()
	c := NewDenyCache(NewRedis(client, WithPrefix(testPrefix(t)), withClock(clk.Now)))
	c.now = clk.Now
	p := mustPlan(t, "deny", Limit{Name: "w", Max: 10, Window: 2 * time.Second})

	first := charge(t, c, "a", p, 7)
	if d := charge(t, c, "a", p, 5); d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("5 more units of 10 with 7 used: %+v", d)
	}
	before := trips.n.Load()
	for range 1000 {
		if d := charge(t, c, "a", p, 5+int64(time.Now().UnixNano()%3)); d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 2*time.Second {
			t.Fatalf("a cached denial: %+v", d)
		}
	}
	if n := trips.n.Load() - before; n != 0 {
		t.Errorf("1000 charges of a denied cost made %d round trips, want none", n)
	}
	// Denies says the same without charging; a cheaper cost is not covered.
	if d, ok := c.Denies("a", p, 6); !ok || d.Allowed || d.Cost != 6 || d.RetryAfter <= 0 {
		t.Errorf("Denies of a covered cost: %+v, %v", d, ok)
	}
	if _, ok := c.Denies("a", p, 4); ok {
		t.Error("Denies of a cost below the denied one: true")
	}
	if d := charge(t, c, "a", p, 3); !d.Allowed {
		t.Errorf("a cheaper charge that fits: %+v", d)
	}
	if n := trips.n.Load() - before; n != 1 {
		t.Errorf("the cheaper charge made %d round trips, want 1", n)
	}
	// A refund through the cache frees units at once.
	charge(t, c, "a", p, 5) // denied again, and cached
	if ok, err := c.Refund(ctx, first.Receipt); !ok || err != nil {
		t.Fatalf("refund: %v, %v", ok, err)
	}
	if d := charge(t, c, "a", p, 5); !d.Allowed {
		t.Errorf("after a refund of 7: %+v, want admitted", d)
	}
	// Another identity, or another plan, is not covered.
	if d := charge(t, c, "b", p, 5); !d.Allowed {
		t.Errorf("another identity: %+v", d)
	}
	// Until the retry time the denial is the cache's; at it, the store is
	// asked again and admits.
	d := charge(t, c, "a", p, 9)
	if d.Allowed {
		t.Fatalf("9 more of 10 with 8 used: %+v", d)
	}
	before = trips.n.Load()
	clk.Set(d.RetryAfter - time.Millisecond)
	if d := charge(t, c, "a", p, 9); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Errorf("a millisecond before the retry time: %+v, want denied, retry after 1ms", d)
	}
	if n := trips.n.Load() - before; n != 0 {
		t.Errorf("a charge before the retry time made %d round trips, want none", n)
	}
	clk.Set(d.RetryAfter)
	if d := charge(t, c, "a", p, 9); !d.Allowed {
		t.Errorf("at the retry time: %+v, want admitted", d)
	}
	if n := trips.n.Load() - before; n != 1 {
		t.Errorf("the charge at the retry time made %d round trips, want 1", n)
	}
}

// A charge above a limit's max is a *TooCostlyError whatever the cache
// remembers: a client told 429 would retry what no wait admits.
func TestDenyCacheTooCostly(t *testing.T) {
	c := NewDenyCache(NewMemory(newClock().Now))
	p := mustPlan(t, "deny", Limit{Name: "w", Max: 10, Window: 2 * time.Second})
	charge(t, c, "a", p, 10)
	if d := charge(t, c, "a", p, 5); d.Allowed {
		t.Fatal("5 more units of 10 with 10 used were admitted")
	}
	if _, err := c.Charge(context.Background(), "a", p, 11); !errors.Is(err, ErrTooCostly) {
		t.Errorf("11 units against a max of 10, with a denial remembered: %v, want ErrTooCostly", err)
	}
}

// A denial of a key by its customer's limit is remembered like any other,
// and answers only the same key under the same plan, customer included; a
// refund, settlement or reset through the cache that gives the customer
// units back (another key's refund, the customer's reset) drops it at
// once, as the key's own refund does. The cache's denials of plans that
// share an identity are counted down as they leave.
func TestDenyCacheShared(t *testing.T) {
	ctx := context.Background()
	client := redisClient(t)
	trips := &roundTrips{}
	client.AddHook(trips)
	clk := newClock()
	c := NewDenyCache(NewRedis(client, WithPrefix(testPrefix(t)), withClock(clk.Now)))
	c.now = clk.Now
	customer := mustPlan(t, "customer", Limit{Name: "customer.minute", Max: 10, Window: time.Minute})
	p := customerOf("acme", PerMinute(30), customer)
	k1, k2 := Member("acme", "key:1"), Member("acme", "key:2")

	denied := func(step string) {
		t.Helper()
		before := trips.n.Load()
		if d := charge(t, c, k2, p, 5); d.Allowed || d.BindingLimit().Limit.Name != "customer.minute" {
			t.Fatalf("%s: 5 on key 2 with the customer's 10 used: %+v", step, d)
		}
		if n := trips.n.Load() - before; n != 0 {
			t.Errorf("%s: a remembered denial made %d round trips, want none", step, n)
		}
	}
	a := charge(t, c, k1, p, 6)
	b := charge(t, c, k2, p, 4)
	charge(t, c, k2, p, 5) // denied by the customer, and remembered
	denied("remembered")
	other := p
	other.Shared = []Shared{{Identity: "other", Plan: customer}}
	if d := charge(t, c, k2, other, 5); !d.Allowed {
		t.Errorf("key 2 sharing another customer: %+v, want asked and admitted", d)
	}

	// Key 1's refund gives the customer 6 back: key 2's denial is dropped.
	if ok, err := c.Refund(ctx, a.Receipt); !ok || err != nil {
		t.Fatal(ok, err)
	}
	d := charge(t, c, k2, p, 5)
	if !d.Allowed {
		t.Fatalf("after key 1's refund: %+v, want admitted", d)
	}
	charge(t, c, k2, p, 5) // denied by the customer again
	denied("denied again")
	// The customer's own reset drops it too.
	if err := c.Reset(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if d := charge(t, c, k2, p, 1); !d.Allowed {
		t.Fatalf("after the customer's reset: %+v, want admitted", d)
	}
	// Settling key 2's charges (its own receipt) lowers its part too.
	if _, ok, err := c.Settle(ctx, b.Receipt, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.shared); n != 0 {
		t.Errorf("with no denial remembered, the cache counts %d shared identities, want none", n)
	}
}
