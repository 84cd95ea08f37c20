package quota

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// customerOf returns a key's plan of one limit, sharing customer's plan
// with the group's own identity, as a service with customers builds it.
func customerOf(group string, key Limit, customer Plan) Plan {
	return Plan{Name: "key", Limits: []Limit{key}, Shared: []Shared{{Identity: group, Plan: customer}}}
}

// A plan's Shared identities and plans are validated before any I/O: at
// most MaxShared, distinct, none empty nor the charged identity, each
// plan valid, without Shared identities of its own, and no limit named
// as another of the charge. A cost is too high if it is above a Shared
// plan's max.
func TestSharedValidated(t *testing.T) {
	customer := mustPlan(t, "customer", Limit{Name: "customer.minute", Max: 10, Window: time.Minute})
	with := func(shared ...Shared) Plan {
		return Plan{Name: "key", Limits: []Limit{PerMinute(20)}, Shared: shared}
	}
	nested := customer
	nested.Shared = []Shared{{Identity: "x", Plan: mustPlan(t, "x", PerHour(5))}}
	history := customer
	history.History = 1500 * time.Microsecond
	for name, p := range map[string]Plan{
		"four shared":        with(Shared{"a", customer}, Shared{"b", mustPlan(t, "b", PerHour(1))}, Shared{"c", mustPlan(t, "c", PerSecond(1))}, Shared{"d", mustPlan(t, "d", PerDay(1), Limit{Name: "d.w", Max: 1, Window: time.Second})}),
		"an empty identity":  with(Shared{"", customer}),
		"an identity twice":  with(Shared{"a", customer}, Shared{"a", mustPlan(t, "b", PerHour(1))}),
		"a nested share":     with(Shared{"a", nested}),
		"a name twice":       with(Shared{"a", mustPlan(t, "c", PerMinute(5))}),
		"a name in two":      with(Shared{"a", customer}, Shared{"b", mustPlan(t, "b", Limit{Name: "customer.minute", Max: 1, Window: time.Second})}),
		"an invalid plan":    with(Shared{"a", Plan{Name: "none"}}),
		"an invalid history": with(Shared{"a", history}),
	} {
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	p := with(Shared{"c", customer})
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := p.MaxCost(); got != 10 {
		t.Errorf("MaxCost = %d, want the customer's 10", got)
	}
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		if _, err := fx.store.Charge(ctx, "c", p, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("a charge of the shared identity itself: %v, want ErrInvalid", err)
		}
		var tc *TooCostlyError
		if _, err := fx.store.Charge(ctx, "k", p, 11); !errors.As(err, &tc) || tc.Limit.Name != "customer.minute" {
			t.Errorf("11 against the customer's 10: %v, want a TooCostlyError naming customer.minute", err)
		}
	})
}

// A charge must fit both the key's limit and its customer's: one that fits
// the key but not the customer is denied and charges neither, and the
// other way round; the decision names the limit that binds, the
// customer's when it does, and the receipt holds a part in each.
func TestSharedAllOrNothing(t *testing.T) {
	customer := mustPlan(t, "customer", Limit{Name: "customer.minute", Max: 15, Window: time.Minute})
	p := customerOf("acme", PerMinute(10), customer)
	k1, k2 := Member("acme", "key:1"), Member("acme", "key:2")
	eachStore(t, func(t *testing.T, fx fixture) {
		d := charge(t, fx.store, k1, p, 8)
		if !d.Allowed || !slices.Equal(used(d), []int64{8, 8}) || d.BindingLimit().Limit.Name != "minute" {
			t.Fatalf("8 on key 1: allowed %v, used %v, binding %q; want [8 8] bound by the key's 2 left", d.Allowed, used(d), d.BindingLimit().Limit.Name)
		}
		parts := d.Receipt.Shared()
		if d.Receipt.Identity() != k1 || len(parts) != 1 || parts[0].Identity() != "acme" || parts[0].Cost() != 8 || !parts[0].At().Equal(d.Receipt.At()) {
			t.Fatalf("receipt %q with parts %+v: want key 1's, and one of acme's at the same time", d.Receipt.Identity(), parts)
		}

		fx.clock.Set(10 * time.Second)
		// Fits key 2 (8 of 10), not the customer (16 of 15).
		d = charge(t, fx.store, k2, p, 8)
		if d.Allowed || d.Binding != 1 || d.BindingLimit().Limit.Name != "customer.minute" || d.RetryAfter != 50*time.Second {
			t.Fatalf("8 on key 2: allowed %v, binding %q, retry after %v; want a denial by customer.minute until key 1's 8 leave", d.Allowed, d.BindingLimit().Limit.Name, d.RetryAfter)
		}
		if !slices.Equal(used(d), []int64{0, 8}) {
			t.Errorf("after the denial: used %v, want [0 8]", used(d))
		}
		// Fits the customer (13 of 15), not key 1 (13 of 10).
		d = charge(t, fx.store, k1, p, 5)
		if d.Allowed || d.Binding != 0 || d.BindingLimit().Limit.Name != "minute" {
			t.Fatalf("5 on key 1: allowed %v, binding %q; want a denial by the key's minute", d.Allowed, d.BindingLimit().Limit.Name)
		}
		if got := used(peek(t, fx.store, "acme", customer)); !slices.Equal(got, []int64{8}) {
			t.Errorf("the customer after two denials: used %v, want 8: a denied charge was recorded", got)
		}
		if got := used(peek(t, fx.store, k2, p)); !slices.Equal(got, []int64{0, 8}) {
			t.Errorf("key 2 after its denial: used %v, want [0 8]", got)
		}
		d = charge(t, fx.store, k2, p, 7)
		if !d.Allowed || !slices.Equal(used(d), []int64{7, 15}) || d.Binding != 1 {
			t.Errorf("7 on key 2: allowed %v, used %v, binding %d; want [7 15], the customer's none left binding", d.Allowed, used(d), d.Binding)
		}
		// The group's own identity, charged under the customer's plan
		// alone, sees every key's charges.
		if d := charge(t, fx.store, "acme", customer, 1); d.Allowed || d.Limits[0].Used != 15 {
			t.Errorf("the customer alone: allowed %v, used %d; want denied, 15", d.Allowed, d.Limits[0].Used)
		}
		// A member identity charged alone is an identity like any other.
		alone := mustPlan(t, "alone", PerMinute(10))
		if d := charge(t, fx.store, k1, alone, 2); !d.Allowed || d.Limits[0].Used != 10 || d.Receipt.Shared() != nil {
			t.Errorf("key 1 alone: allowed %v, used %d, parts %v; want 10 used and a plain receipt", d.Allowed, d.Limits[0].Used, d.Receipt.Shared())
		}
	})
}

// Three identities, the third a short-lived token's own lower budget: a
// charge must fit all three, and is recorded in all three.
func TestSharedThreeParts(t *testing.T) {
	customer := mustPlan(t, "customer", Limit{Name: "customer.minute", Max: 100, Window: time.Minute})
	token := mustPlan(t, "token", Limit{Name: "token.minute", Max: 6, Window: time.Minute}, Limit{Name: "token.day", Max: 5, Period: Day})
	key := mustPlan(t, "key", PerMinute(50))
	p := key
	p.Shared = []Shared{{Identity: "acme", Plan: customer}, {Identity: Member("acme", "token:9"), Plan: token}}
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		d := charge(t, fx.store, Member("acme", "key:1"), p, 4)
		if !d.Allowed || !slices.Equal(used(d), []int64{4, 4, 4, 4}) || len(d.Receipt.Shared()) != 2 {
			t.Fatalf("4: allowed %v, used %v, %d shared parts; want 4 everywhere, two parts", d.Allowed, used(d), len(d.Receipt.Shared()))
		}
		if ps := d.Receipt.Shared()[1].Periods(); len(ps) != 1 || ps[0].Limit != "token.day" {
			t.Errorf("the token's part was counted in %v, want its day", ps)
		}
		d = charge(t, fx.store, Member("acme", "key:1"), p, 2)
		if d.Allowed || d.BindingLimit().Limit.Name != "token.day" {
			t.Errorf("2 more: allowed %v, binding %q; want the token's day (5) to bind", d.Allowed, d.BindingLimit().Limit.Name)
		}
		if _, ok, err := fx.store.Settle(ctx, charge(t, fx.store, Member("acme", "key:1"), p, 1).Receipt, 0); !ok || err != nil {
			t.Fatalf("settle to 0: %v %v", ok, err)
		}
		if got := used(peek(t, fx.store, Member("acme", "key:1"), p)); !slices.Equal(got, []int64{4, 4, 4, 4}) {
			t.Errorf("after a charge settled to 0: used %v, want 4 everywhere", got)
		}
	})
}

// A joint receipt gives back in every part: a settlement lowers the key's
// and the customer's charge, and returns a receipt whose parts are
// lowered too; a refund then zeroes both, once. A refund retried after
// the first reached one part only (a failure in between) gives back the
// other, and the first not twice.
func TestSharedRefundSettle(t *testing.T) {
	customer := mustPlan(t, "customer", Limit{Name: "customer.minute", Max: 100, Window: time.Minute}, Limit{Name: "customer.day", Max: 100, Period: Day})
	p := customerOf("acme", PerMinute(50), customer)
	k := Member("acme", "key:1")
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		a := charge(t, fx.store, k, p, 9)
		b := charge(t, fx.store, k, p, 2)
		rc, ok, err := fx.store.Settle(ctx, a.Receipt, 3)
		if !ok || err != nil || rc.Cost() != 3 || rc.Shared()[0].Cost() != 3 {
			t.Fatalf("settle 9 to 3: %v %v, receipt of %d with parts %+v", ok, err, rc.Cost(), rc.Shared())
		}
		if a.Receipt.Shared()[0].Cost() != 9 {
			t.Error("settling changed the parts of the receipt it was given")
		}
		if got := used(peek(t, fx.store, k, p)); !slices.Equal(got, []int64{5, 5, 5}) {
			t.Errorf("after the settlement: used %v, want 5 in the key, the customer's minute and day", got)
		}
		if _, ok, _ := fx.store.Settle(ctx, a.Receipt, 1); ok {
			t.Error("the superseded receipt settled again")
		}

		// A first try that refunded the key's part only.
		if ok, err := fx.store.Refund(ctx, rc.part(0)); !ok || err != nil {
			t.Fatalf("refund of the key's part: %v %v", ok, err)
		}
		if got := used(peek(t, fx.store, k, p)); !slices.Equal(got, []int64{2, 5, 5}) {
			t.Fatalf("after the key's part alone: used %v, want [2 5 5]", got)
		}
		if ok, err := fx.store.Refund(ctx, rc); !ok || err != nil {
			t.Fatalf("the retry: %v %v, want the customer's part refunded", ok, err)
		}
		if got := used(peek(t, fx.store, k, p)); !slices.Equal(got, []int64{2, 2, 2}) {
			t.Errorf("after the retry: used %v, want b's 2 everywhere", got)
		}
		if ok, err := fx.store.Refund(ctx, rc); ok || err != nil {
			t.Errorf("a third refund: %v %v, want false", ok, err)
		}
		if ok, err := fx.store.Refund(ctx, b.Receipt); !ok || err != nil {
			t.Fatalf("refund b: %v %v", ok, err)
		}
		if got := used(peek(t, fx.store, k, p)); !slices.Equal(got, []int64{0, 0, 0}) {
			t.Errorf("after every refund: used %v, want none", got)
		}
	})
}

// Many goroutines charge several keys of one customer through two stores
// ("servers") that share the Redis (one Memory in process), each key with
// its own limit and the customer's below their sum. Every trailing window
// of the customer holds at most its max, and the busiest holds exactly
// it; no key's holds more than its own; and every admitted unit is
// recorded in its key and in the customer, none more (their month
// counters, which never bind, hold exactly what was admitted).
func TestSharedConcurrentExactness(t *testing.T) {
	const keys, keyMax, customerMax = 4, 60, 150
	customer := mustPlan(t, "customer", Limit{Name: "customer.second", Max: customerMax, Window: time.Second}, Limit{Name: "customer.month", Max: MaxUnits, Period: Month})
	plan := Plan{Name: "key", Limits: []Limit{{Name: "second", Max: keyMax, Window: time.Second}, {Name: "month", Max: MaxUnits, Period: Month}},
		Shared: []Shared{{Identity: "acme", Plan: customer}}}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	targets := serverTargets(2)
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			servers := target.servers(t)
			deadline := time.Now().Add(1500 * time.Millisecond)
			var mu sync.Mutex
			admits := make([][]admit, keys) // by key
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := servers[g%len(servers)]
					rng := rand.New(rand.NewPCG(uint64(g), 3))
					for time.Now().Before(deadline) {
						k := rng.IntN(keys)
						d, err := s.Charge(context.Background(), Member("acme", "key:"+strconv.Itoa(k)), plan, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admits[k] = append(admits[k], admit{d.Receipt.at, 1})
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			var all []admit
			for k, as := range admits {
				slices.SortFunc(as, func(a, b admit) int { return int(a.at - b.at) })
				if peak := peakWindowSum(as, time.Second.Microseconds()); peak > keyMax {
					t.Errorf("key %d: a second admitted %d, more than its %d", k, peak, keyMax)
				}
				d := peek(t, servers[0], Member("acme", "key:"+strconv.Itoa(k)), plan)
				if got := d.Limits[1].Used; got != int64(len(as)) {
					t.Errorf("key %d: %d admitted, its month counts %d", k, len(as), got)
				}
				all = append(all, as...)
			}
			slices.SortFunc(all, func(a, b admit) int { return int(a.at - b.at) })
			peak := peakWindowSum(all, time.Second.Microseconds())
			t.Logf("%d admitted; the customer's busiest second holds %d of %d", len(all), peak, customerMax)
			if peak != customerMax {
				t.Errorf("the customer's busiest second holds %d, want exactly its max %d", peak, customerMax)
			}
			if got := peek(t, servers[0], "acme", customer).Limits[1].Used; got != int64(len(all)) {
				t.Errorf("%d admitted, the customer's month counts %d", len(all), got)
			}
		})
	}
}

// A customer's month counter that Redis lost is restored from the
// PeriodSource before it is charged again, as a key's own is: one look-up
// for each identity whose counters are missing, and the units left are
// exactly what the ledger says.
func TestSharedRestoreLostCounters(t *testing.T) {
	src := &bookSource{}
	customer := mustPlan(t, "customer", Limit{Name: "customer.hour", Max: 1000, Window: time.Hour}, Limit{Name: "customer.month", Max: 50, Period: Month})
	for _, fx := range restoreFixtures(t, src) {
		t.Run(fx.name, func(t *testing.T) {
			group := "acme-" + fx.name
			k := Member(group, "key:1")
			p := customerOf(group, PerHour(1000), customer)
			p.Limits = append(p.Limits, PerMonth(40))
			d := charge(t, fx.store, k, p, 30)
			if !d.Allowed {
				t.Fatal("the first 30 were refused")
			}
			src.set(k, "month", d.Receipt.Periods()[0].Start, 30)
			src.set(group, "customer.month", d.Receipt.Shared()[0].Periods()[0].Start, 30)
			fx.lose(k)
			fx.lose(group)
			before := src.calls.Load()
			if got := used(peek(t, fx.store, k, p)); !slices.Equal(got, []int64{30, 30, 30, 30}) {
				t.Errorf("after the loss, a peek sees %v, want 30 everywhere, restored", got)
			}
			if n := src.calls.Load() - before; n != 2 {
				t.Errorf("the source was asked %d times, want twice: once for the key, once for the customer", n)
			}
			// The key has 10 left, the customer 20: a second key has 20.
			k2 := Member(group, "key:2")
			if d := charge(t, fx.store, k2, p, 21); d.Allowed || d.BindingLimit().Limit.Name != "customer.month" {
				t.Errorf("21 on key 2: allowed %v, binding %q; want the customer's month to refuse", d.Allowed, d.BindingLimit().Limit.Name)
			}
			if d := charge(t, fx.store, k, p, 11); d.Allowed || d.BindingLimit().Limit.Name != "month" {
				t.Errorf("11 on key 1: allowed %v, binding %q; want its own month to refuse", d.Allowed, d.BindingLimit().Limit.Name)
			}
			if d := charge(t, fx.store, k2, p, 20); !d.Allowed {
				t.Errorf("20 on key 2 refused where 20 are left (used %v)", used(d))
			}
		})
	}
}

// An overdraft charge of a joint plan is recorded in every part, once per
// id.
func TestSharedOverdraft(t *testing.T) {
	customer := mustPlan(t, "customer", Limit{Name: "customer.minute", Max: 5, Window: time.Minute}, Limit{Name: "customer.day", Max: 5, Period: Day})
	p := customerOf("acme", PerMinute(20), customer)
	for _, tc := range []struct {
		name   string
		client rediser
	}{{"redis", redisClient(t)}, {"cluster", clusterClient(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRedis(tc.client, WithPrefix(testPrefix(t)))
			ctx := context.Background()
			k := Member("acme", "key:1")
			charge(t, r, k, p, 4)
			for range 2 {
				d, _, err := r.ChargeOverdraft(ctx, k, p, 3, "once")
				if err != nil {
					t.Fatal(err)
				}
				if !d.Receipt.IsZero() && len(d.Receipt.Shared()) != 1 {
					t.Errorf("the overdraft's receipt has %d shared parts, want 1", len(d.Receipt.Shared()))
				}
			}
			if got := used(peek(t, r, k, p)); !slices.Equal(got, []int64{7, 7, 7}) {
				t.Errorf("after 4 charged and 3 overdrawn twice by one id: used %v, want 7 everywhere", got)
			}
		})
	}
}

// On Redis Cluster every part of a charge must be in one slot: a Shared
// identity in another slot than the charged one (not built with Member)
// fails the charge with Redis's CROSSSLOT error, wrapped, and charges
// nothing; Member identities of one group, and the group, charge
// together.
func TestSharedCrossSlot(t *testing.T) {
	ctx := context.Background()
	c := clusterClient(t)
	r := NewRedis(c, WithPrefix(testPrefix(t)))
	customer := mustPlan(t, "customer", Limit{Name: "customer.minute", Max: 10, Window: time.Minute})
	p := customerOf("customer-x", PerMinute(10), customer)
	key := "key-in-another-slot"
	if c.ClusterKeySlot(ctx, r.key(key)).Val() == c.ClusterKeySlot(ctx, r.key("customer-x")).Val() {
		t.Fatal("pick identities in different slots")
	}
	_, err := r.Charge(ctx, key, p, 1)
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a charge across slots: %v, want Redis's CROSSSLOT error", err)
	}
	if u := peek(t, r, key, mustPlan(t, "alone", PerMinute(10))).Limits[0].Used + peek(t, r, "customer-x", customer).Limits[0].Used; u != 0 {
		t.Errorf("the failed charge recorded %d units", u)
	}
	for i := range 20 {
		k := Member("customer-x", "key:"+strconv.Itoa(i))
		if c.ClusterKeySlot(ctx, r.key(k)).Val() != c.ClusterKeySlot(ctx, r.key("customer-x")).Val() {
			t.Errorf("%q is not in its group's slot", k)
		}
	}
}
