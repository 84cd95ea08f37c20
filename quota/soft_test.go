package quota

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// A soft limit is a day or month only; it leaves MaxCost and ErrTooCostly
// to the limits that can refuse.
func TestSoftValidated(t *testing.T) {
	_, err := NewPlan("p", Limit{Name: "w", Max: 10, Window: time.Second, Soft: true})
	var le *LimitError
	if !errors.As(err, &le) || le.Field != "soft" || le.Limit != "w" || !errors.Is(err, ErrInvalid) {
		t.Errorf("a soft sliding window: %v, want a *LimitError of field soft", err)
	}
	p := mustPlan(t, "p", Limit{Name: "w", Max: 10, Window: time.Second}, Limit{Name: "day", Max: 4, Period: Day, Soft: true})
	if got := p.MaxCost(); got != 10 {
		t.Errorf("MaxCost = %d, want 10: a soft day of 4 refuses nothing", got)
	}
	if err := checkCharge("id", p, 8); err != nil {
		t.Errorf("a charge of 8 past a soft day of 4: %v, want none", err)
	}
	if err := checkCharge("id", p, 11); !errors.Is(err, ErrTooCostly) {
		t.Errorf("a charge of 11 over a window of 10: %v, want ErrTooCostly", err)
	}
	if got, want := p.Limits[1].String(), "4 per day (day, soft)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// A soft day admits what its windows admit, counted past its max: the
// receipt says how many units went past it, Remaining stays 0, and the
// windows still refuse as before, with their own retry time. The same
// plan with a hard day refuses at the max until the day ends.
func TestSoftLimitOverage(t *testing.T) {
	ctx := context.Background()
	window := Limit{Name: "w", Max: 10, Window: time.Second}
	soft := mustPlan(t, "soft", window, Limit{Name: "day", Max: 12, Period: Day, Soft: true})
	hard := mustPlan(t, "hard", window, Limit{Name: "day", Max: 12, Period: Day})
	eachStore(t, func(t *testing.T, fx fixture) {
		steps := []struct {
			at            time.Duration
			cost          int64
			allowed       bool
			used, overage int64 // the day's, and the receipt's
			retryAfter    time.Duration
		}{
			{0, 5, true, 5, 0, 0},
			{0, 5, true, 10, 0, 0},
			{time.Second, 5, true, 15, 3, 0}, // 2 within the day, 3 past it
			{time.Second, 5, true, 20, 5, 0}, // all 5 past it
			{time.Second, 1, false, 20, 0, time.Second},
		}
		var last Receipt
		for i, s := range steps {
			fx.clock.Set(s.at)
			d := charge(t, fx.store, "c", soft, s.cost)
			day := d.Limits[1]
			if d.Allowed != s.allowed || day.Used != s.used || day.Remaining != 0 && day.Used >= 12 || d.Receipt.Overage() != s.overage {
				t.Fatalf("step %d: allowed %v, day used %d remaining %d, overage %d; want %v, %d, 0 past the max, %d",
					i, d.Allowed, day.Used, day.Remaining, d.Receipt.Overage(), s.allowed, s.used, s.overage)
			}
			if d.Allowed && d.Binding != 0 {
				t.Errorf("step %d: binding %s, want the window: a soft limit refuses nothing", i, d.BindingLimit().Limit.Name)
			}
			if !d.Allowed && (d.RetryAfter != s.retryAfter || d.Binding != 0) {
				t.Errorf("step %d: denied by %s, retry after %v; want the window's %v", i, d.BindingLimit().Limit.Name, d.RetryAfter, s.retryAfter)
			}
			if d.Allowed {
				last = d.Receipt
				if g := d.Given(4).Limits[1]; g.Used != s.used-4 || g.Remaining != max(12-(s.used-4), 0) {
					t.Errorf("step %d: given 4: used %d remaining %d", i, g.Used, g.Remaining)
				}
			}
		}
		// Settled to 1, the last charge gives back 4 of its 5 units past
		// the day's max: 1 stays past it.
		settled, ok, err := fx.store.Settle(ctx, last, 1)
		if err != nil || !ok || settled.Overage() != 1 || settled.Cost() != 1 {
			t.Fatalf("settled to 1: overage %d cost %d ok %v err %v; want 1, 1", settled.Overage(), settled.Cost(), ok, err)
		}
		if d := peek(t, fx.store, "c", soft); d.Limits[1].Used != 16 || d.Limits[1].Remaining != 0 || d.Binding != 0 {
			t.Errorf("after the settlement: day used %d remaining %d binding %d, want 16, 0, the window", d.Limits[1].Used, d.Limits[1].Remaining, d.Binding)
		}
		// The next day counts from zero.
		fx.clock.Set(24 * time.Hour)
		if d := charge(t, fx.store, "c", soft, 5); !d.Allowed || d.Limits[1].Used != 5 || d.Receipt.Overage() != 0 {
			t.Errorf("the next day: allowed %v used %d overage %d, want true, 5, 0", d.Allowed, d.Limits[1].Used, d.Receipt.Overage())
		}

		// A hard day refuses at its max until the day ends.
		fx.clock.Set(0)
		charge(t, fx.store, "h", hard, 10)
		fx.clock.Set(time.Second)
		d := charge(t, fx.store, "h", hard, 5)
		if _, end := Day.Bounds(fx.clock.Now(), nil); d.Allowed || d.BindingLimit().Limit.Name != "day" || d.RetryAfter != end.Sub(fx.clock.Now()) {
			t.Errorf("a hard day: allowed %v by %s, retry after %v; want refused by the day until it ends", d.Allowed, d.BindingLimit().Limit.Name, d.RetryAfter)
		}
	})
}

// Many charges at once, through several clients of Redis (single node and
// cluster) and the in-process store, of one identity whose month is soft:
// every charge its sliding window admits is admitted, whatever the month
// says; no trailing second holds more than its max, and one is full; the
// month counts every admitted unit; and the units the receipts say went
// past the month add up to exactly what it counts past its max.
func TestSoftConcurrentExactness(t *testing.T) {
	const secondMax, monthMax, maxCost = 300, 200, 5
	plan := mustPlan(t, "payg", Limit{Name: "second", Max: secondMax, Window: time.Second}, Limit{Name: "month", Max: monthMax, Period: Month, Soft: true})
	targets := serverTargets(4)
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			servers := target.servers(t)
			deadline := time.Now().Add(1200 * time.Millisecond)
			var mu sync.Mutex
			var admits []admit
			var overage int64
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := servers[g%len(servers)]
					rng := rand.New(rand.NewPCG(uint64(g), 5))
					for time.Now().Before(deadline) {
						cost := 1 + rng.Int64N(maxCost)
						d, err := s.Charge(context.Background(), "payg", plan, cost)
						switch {
						case err != nil:
							t.Error(err)
							return
						case !d.Allowed && d.BindingLimit().Limit.Name != "second":
							t.Errorf("refused by %s: only the second may refuse", d.BindingLimit().Limit.Name)
							return
						case d.Allowed && (d.Receipt.Overage() < 0 || d.Receipt.Overage() > cost):
							t.Errorf("a charge of %d with %d past the month", cost, d.Receipt.Overage())
							return
						case d.Allowed:
							mu.Lock()
							admits = append(admits, admit{d.Receipt.at, cost})
							overage += d.Receipt.Overage()
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			slices.SortFunc(admits, func(a, b admit) int { return int(a.at - b.at) })
			var total int64
			for _, a := range admits {
				total += a.cost
			}
			peak := peakWindowSum(admits, time.Second.Microseconds())
			month := peek(t, servers[0], "payg", plan).Limits[1]
			t.Logf("%d charges, %d units admitted; busiest second %d of %d; month %d of %d, %d past it by the receipts",
				len(admits), total, peak, secondMax, month.Used, monthMax, overage)
			if peak > secondMax || peak < secondMax-(maxCost-1) {
				t.Errorf("the busiest second holds %d: want at most %d and within %d of it", peak, secondMax, maxCost-1)
			}
			if month.Used != total || month.Remaining != 0 {
				t.Errorf("the month counts %d (remaining %d), %d admitted: want equal, remaining 0", month.Used, month.Remaining, total)
			}
			if total <= monthMax || overage != total-monthMax {
				t.Errorf("%d units past the month by the receipts, want exactly %d - %d = %d", overage, total, monthMax, total-monthMax)
			}
		})
	}
}
