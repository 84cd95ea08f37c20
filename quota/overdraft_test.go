package quota

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/quotatest/faultproxy"
)

// An overdraft charge is recorded in every window and period, past their
// maxima, once per id, on a single node and on a cluster (its mark shares
// the log's slot); what it overdraws refuses charges until it has left.
func TestChargeOverdraft(t *testing.T) {
	plan := mustPlan(t, "overdraft",
		Limit{Name: "second", Max: 5, Window: time.Second},
		Limit{Name: "minute", Max: 20, Window: time.Minute},
		Limit{Name: "day", Max: 8, Period: Day})
	for _, tc := range []struct {
		name   string
		client rediser
	}{{"redis", redisClient(t)}, {"cluster", clusterClient(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			r := NewRedis(tc.client, WithPrefix(testPrefix(t)), withClock(c.Now))
			ctx := context.Background()
			overdraft := func(cost int64, id string) bool {
				t.Helper()
				d, made, err := r.ChargeOverdraft(ctx, "k", plan, cost, id)
				if err != nil {
					t.Fatal(err)
				}
				if made != !d.Receipt.IsZero() || made && (!d.Allowed || d.Receipt.Cost() != cost || len(d.Receipt.Periods()) != 1) {
					t.Errorf("overdraft of %d: made %v, %+v: want a receipt of the cost, in the day, when made", cost, made, d)
				}
				return made
			}
			charge(t, r, "k", plan, 4)
			if !overdraft(3, "a") || !overdraft(4, "b") {
				t.Fatal("a first overdraft charge of an id was not made")
			}
			d := peek(t, r, "k", plan)
			if got := used(d); !slices.Equal(got, []int64{11, 11, 11}) {
				t.Errorf("used %v after 4 charged and 3 + 4 overdrawn, want 11 in every limit", got)
			}
			if got := []int64{d.Limits[0].Remaining, d.Limits[1].Remaining, d.Limits[2].Remaining}; !slices.Equal(got, []int64{0, 9, 0}) {
				t.Errorf("remaining %v, want none where the max is passed: [0 9 0]", got)
			}
			if overdraft(3, "a") {
				t.Error("a retry of id a was charged again")
			}
			if got := used(peek(t, r, "k", plan)); !slices.Equal(got, []int64{11, 11, 11}) {
				t.Errorf("used %v after a retried id, want 11 still", got)
			}
			// The second has passed: the minute still holds 11 of 20, and
			// the day 11 of 8, which refuses.
			c.Set(2 * time.Second)
			if d := charge(t, r, "k", plan, 1); d.Allowed || d.Limits[d.Binding].Limit.Name != "day" {
				t.Errorf("a charge over an overdrawn day: allowed %v, binding %q", d.Allowed, d.Limits[d.Binding].Limit.Name)
			}
			if got := used(peek(t, r, "k", plan)); !slices.Equal(got, []int64{0, 11, 11}) {
				t.Errorf("used %v two seconds on, want [0 11 11]", got)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		r := NewRedis(redisClient(t), WithPrefix(testPrefix(t)))
		for _, id := range []string{"", "a b", "{x}"} {
			if _, _, err := r.ChargeOverdraft(context.Background(), "k", plan, 1, id); !errors.Is(err, ErrInvalid) {
				t.Errorf("id %q: %v, want ErrInvalid", id, err)
			}
		}
		if _, _, err := r.ChargeOverdraft(context.Background(), "k", plan, 9, "x"); !errors.Is(err, ErrTooCostly) {
			t.Errorf("a cost above a max: %v, want ErrTooCostly", err)
		}
	})
}

// An overdraft charge whose reply is lost (Redis made it, the caller gave
// up before the answer came back) is retried by its id and counted once.
func TestChargeOverdraftLostReply(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	client := quotatest.NewClient(t, "redis://"+proxy.Addr())
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { direct.Close() })
	prefix := testPrefix(t)
	// r goes through the proxy; seen reads Redis directly.
	r, seen := NewRedis(client, WithPrefix(prefix)), NewRedis(direct, WithPrefix(prefix))
	plan := mustPlan(t, "p", PerMinute(10))

	// Redis knows the script (an EVALSHA answered NOSCRIPT late would
	// send no EVAL).
	if _, _, err := r.ChargeOverdraft(context.Background(), "k", plan, 1, "warm"); err != nil {
		t.Fatal(err)
	}
	// The script runs at once; its answer is held back past the caller's
	// deadline.
	proxy.SetLatency(0, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, _, err = r.ChargeOverdraft(ctx, "k", plan, 3, "once")
	cancel()
	if err == nil {
		t.Fatal("the overdraft charge answered through a two-second delay within 100ms")
	}
	for deadline := time.Now().Add(5 * time.Second); used(peek(t, seen, "k", plan))[0] != 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt never reached Redis")
		}
	}
	proxy.Restore()
	_, made, err := r.ChargeOverdraft(context.Background(), "k", plan, 3, "once")
	if err != nil || made {
		t.Errorf("the retry: made %v, %v; want not made, no error", made, err)
	}
	if u := used(peek(t, seen, "k", plan)); u[0] != 4 {
		t.Errorf("used %v after 1, then 3 whose reply was lost and retried, want 4", u)
	}
}

// An overdraft charge that finds its counters lost restores them from the
// PeriodSource first, as a charge does, and is then made once: the restore
// is no try of its id.
func TestChargeOverdraftRestores(t *testing.T) {
	src := &bookSource{}
	p := mustPlan(t, "monthly", PerSecond(1000), PerMonth(50))
	for _, fx := range restoreFixtures(t, src) {
		t.Run(fx.name, func(t *testing.T) {
			id := "k-" + fx.name
			d := charge(t, fx.store, id, p, 40)
			src.set(id, "month", d.Receipt.Periods()[0].Start, 40)
			fx.lose(id)
			d, made, err := fx.store.ChargeOverdraft(context.Background(), id, p, 20, "after-loss")
			if err != nil || !made {
				t.Fatalf("made %v, %v", made, err)
			}
			if d.Limits[1].Used != 60 || d.Limits[1].Remaining != 0 {
				t.Errorf("the month after 40 restored and 20 overdrawn: %+v, want 60 used, none left", d.Limits[1])
			}
			if _, made, err := fx.store.ChargeOverdraft(context.Background(), id, p, 20, "after-loss"); err != nil || made {
				t.Errorf("the retry: made %v, %v; want not made", made, err)
			}
			if u := used(peek(t, fx.store, id, p)); u[1] != 60 {
				t.Errorf("used %v, want 60 in the month", u)
			}
		})
	}
}
