package quota

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// The Redis store (on a single node and on a cluster) and the in-memory
// reference model are fed the same random sequence of (time, identity,
// plan, cost) charges, peeks, refunds, settlements and resets, and must
// decide every step identically. Time moves on as traffic usually does,
// and, in a second run, in bursts of charges at one microsecond (a frozen
// clock, a clock stepped back), whose records share an admit time. A third
// run keeps one identity's log far longer than the chunk a script reads at
// once, so records leave, are refunded and are counted by offset, and logs
// are compacted and re-planned from beyond it.
func TestDifferentialRedisVersusMemory(t *testing.T) {
	small := []Plan{
		mustPlan(t, "one", Limit{Name: "w", Max: 20, Window: 3 * time.Second}),
		mustPlan(t, "two", Limit{Name: "burst", Max: 10, Window: time.Second}, Limit{Name: "minute", Max: 40, Window: 10 * time.Second}),
		mustPlan(t, "three", Limit{Name: "a", Max: 15, Window: 1500 * time.Millisecond}, Limit{Name: "b", Max: 25, Window: 3 * time.Second}, Limit{Name: "c", Max: 60, Window: 20 * time.Second}),
		mustPlan(t, "same-windows", Limit{Name: "x", Max: 30, Window: 10 * time.Second}),
	}
	t.Run("steady", func(t *testing.T) {
		differential(t, 7, small, identities(4), func(rng *rand.Rand) time.Duration {
			switch r := rng.IntN(10); {
			case r < 6:
				return time.Duration(rng.IntN(400)) * time.Millisecond
			case r < 8:
				return time.Duration(rng.IntN(1000)) * time.Microsecond
			case r < 9:
				return time.Duration(rng.IntN(12)) * time.Second
			}
			return 0
		})
	})
	t.Run("bursts", func(t *testing.T) {
		differential(t, 8, small, identities(4), func(rng *rand.Rand) time.Duration {
			switch r := rng.IntN(10); {
			case r < 7:
				return 0
			case r < 9:
				return time.Duration(rng.IntN(3)) * time.Microsecond
			}
			return time.Duration(rng.IntN(2000)) * time.Millisecond
		})
	})
	t.Run("periods", func(t *testing.T) {
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		in := func(p Plan) Plan { p.Location = ny; return p }
		periods := []Plan{
			in(mustPlan(t, "daily", Limit{Name: "w", Max: 20, Window: 3 * time.Second}, PerDay(60))),
			in(mustPlan(t, "monthly", Limit{Name: "burst", Max: 10, Window: time.Second}, PerMonth(300), PerDay(80))),
			mustPlan(t, "utc-day", Limit{Name: "x", Max: 30, Window: 10 * time.Second}, PerDay(50)),
		}
		differential(t, 10, periods, identities(4), acrossDays)
	})
	// Keys of one customer, each charged under a plan that shares the
	// customer's (windows, and a day in New York), one of them a team's
	// too: every part is decided, recorded, refunded and settled alike.
	t.Run("shared", func(t *testing.T) {
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		customer := mustPlan(t, "customer", Limit{Name: "customer.burst", Max: 12, Window: time.Second},
			Limit{Name: "customer.w", Max: 35, Window: 3 * time.Second}, Limit{Name: "customer.day", Max: 200, Period: Day})
		customer.Location = ny
		team := mustPlan(t, "team", Limit{Name: "team.w", Max: 25, Window: 2 * time.Second})
		sharing := func(p Plan, shared ...Shared) Plan { p.Shared = shared; return p }
		plans := []Plan{
			sharing(mustPlan(t, "k-one", Limit{Name: "w", Max: 20, Window: 3 * time.Second}), Shared{"g", customer}),
			sharing(mustPlan(t, "k-two", Limit{Name: "burst", Max: 10, Window: time.Second}, Limit{Name: "minute", Max: 40, Window: 10 * time.Second}),
				Shared{"g", customer}, Shared{Member("g", "team"), team}),
			sharing(mustPlan(t, "k-day", Limit{Name: "x", Max: 30, Window: 10 * time.Second}, PerDay(60)), Shared{"g", customer}),
		}
		keys := []string{Member("g", "key:0"), Member("g", "key:1"), Member("g", "key:2"), Member("g", "key:3")}
		differential(t, 12, plans, keys, acrossDays)
	})
	// Soft days and months, a key's own and its customer's: admitted past
	// their max, the units past it alike in every store's receipts.
	t.Run("soft", func(t *testing.T) {
		customer := mustPlan(t, "customer", Limit{Name: "customer.w", Max: 35, Window: 3 * time.Second},
			Limit{Name: "customer.day", Max: 90, Period: Day, Soft: true})
		soft := func(l Limit) Limit { l.Soft = true; return l }
		sharing := func(p Plan, shared ...Shared) Plan { p.Shared = shared; return p }
		plans := []Plan{
			mustPlan(t, "soft-day", Limit{Name: "w", Max: 20, Window: 3 * time.Second}, soft(PerDay(60))),
			mustPlan(t, "soft-month", Limit{Name: "burst", Max: 10, Window: time.Second}, soft(PerMonth(300)), PerDay(80)),
			sharing(mustPlan(t, "k-soft", Limit{Name: "x", Max: 30, Window: 10 * time.Second}, soft(PerDay(40))), Shared{"g", customer}),
		}
		keys := []string{Member("g", "key:0"), Member("g", "key:1"), Member("g", "key:2"), Member("g", "key:3")}
		differential(t, 13, plans, keys, acrossDays)
	})
	t.Run("large", func(t *testing.T) {
		large := []Plan{
			mustPlan(t, "large", Limit{Name: "w", Max: 5000, Window: 2 * time.Second}),
			mustPlan(t, "large-burst", Limit{Name: "burst", Max: 300, Window: 100 * time.Millisecond}, Limit{Name: "w", Max: 5000, Window: 2 * time.Second}),
		}
		// About 1,000 records of 5 bytes in the window, twice the chunk.
		differential(t, 9, large, identities(1), func(rng *rand.Rand) time.Duration {
			return time.Duration(rng.IntN(2000)) * time.Microsecond
		})
	})
}

// acrossDays moves the clock on by jumps of up to half a day, which cross
// midnights (New York's and UTC's), the ends of January and February, and
// the night New York's clocks go forward (14 March 2027).
func acrossDays(rng *rand.Rand) time.Duration {
	switch r := rng.IntN(10); {
	case r < 6:
		return time.Duration(rng.IntN(400)) * time.Millisecond
	case r < 8:
		return time.Duration(rng.IntN(30)) * time.Minute
	case r < 9:
		return time.Duration(rng.IntN(12)) * time.Hour
	}
	return 0
}

// identities returns n identities: "id-0" and on.
func identities(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%d", i)
	}
	return ids
}

// differential runs the same random steps against every store: charges,
// peeks, refunds, settlements and resets of ids, identity i mostly under
// plan i (modulo their number), with the clock moved on by advance.
func differential(t *testing.T, seed uint64, plans []Plan, ids []string, advance func(*rand.Rand) time.Duration) {
	fxs := fixtures(t)
	ref := fxs[0]
	const steps = 3000
	rng := rand.New(rand.NewPCG(seed, 11))
	ctx := context.Background()
	receipts := make([][]Receipt, len(fxs)) // per store, in the same order
	var now time.Duration
	seen := map[string]int{}
	for step := range steps {
		now += advance(rng)
		n := rng.IntN(len(ids))
		id := ids[n]
		// Mostly each identity keeps its plan; now and then it is re-planned.
		plan := plans[n%len(plans)]
		if rng.IntN(40) == 0 {
			plan = plans[rng.IntN(len(plans))]
		}
		op := rng.IntN(20)
		cost := 1 + rng.Int64N(9)
		var refIdx = -1
		if op >= 16 && len(receipts[0]) > 0 {
			// Mostly a recent charge, still in the log; sometimes any.
			refIdx = len(receipts[0]) - 1 - rng.IntN(min(len(receipts[0]), 4))
			if rng.IntN(4) == 0 {
				refIdx = rng.IntN(len(receipts[0]))
			}
		}
		actual := rng.Int64N(cost + 1)

		results := make([]string, len(fxs))
		for i, fx := range fxs {
			fx.clock.Set(now)
			var res any
			var err error
			switch {
			case op < 14:
				var d Decision
				d, err = fx.store.Charge(ctx, id, plan, cost)
				if d.Allowed {
					receipts[i] = append(receipts[i], d.Receipt)
				}
				if i == 0 {
					seen[fmt.Sprintf("allowed=%v", d.Allowed)]++
					if d.Receipt.Overage() > 0 {
						seen["overage"]++
					}
				}
				overage := d.Receipt.Overage()
				d.Receipt = Receipt{} // members differ once a Redis key has expired in real time
				res = fmt.Sprintf("%+v overage=%d", d, overage)
			case op < 16:
				res, err = fx.store.Peek(ctx, id, plan)
			case refIdx >= 0 && op < 18:
				var ok bool
				ok, err = fx.store.Refund(ctx, receipts[i][refIdx])
				if i == 0 {
					seen[fmt.Sprintf("refunded=%v", ok)]++
				}
				res = ok
			case refIdx >= 0:
				rc := receipts[i][refIdx]
				var ok bool
				rc, ok, err = fx.store.Settle(ctx, rc, min(actual, rc.Cost()))
				if ok && !rc.IsZero() {
					receipts[i][refIdx] = rc
				}
				res = fmt.Sprintf("%v overage=%d", ok, rc.Overage())
				if i == 0 {
					seen[fmt.Sprintf("settled=%v", ok)]++
				}
			case op == 19 && rng.IntN(10) == 0:
				err = fx.store.Reset(ctx, id)
			}
			results[i] = fmt.Sprintf("%+v %v", res, err)
		}
		for i := 1; i < len(fxs); i++ {
			if !reflect.DeepEqual(results[i], results[0]) {
				t.Fatalf("step %d (t=%v %s plan %s op %d cost %d):\n%s: %s\n%s: %s",
					step, now, id, plan.Name, op, cost, ref.name, results[0], fxs[i].name, results[i])
			}
		}
	}
	t.Logf("outcomes: %v", seen)
	for _, k := range []string{"allowed=true", "allowed=false", "refunded=true", "refunded=false", "settled=true", "settled=false"} {
		if seen[k] < 10 {
			t.Errorf("only %d steps with %s: the sequence does not exercise it", seen[k], k)
		}
	}
	if soft := slices.ContainsFunc(plans, func(p Plan) bool {
		return slices.ContainsFunc(p.Limits, func(l Limit) bool { return l.Soft })
	}); soft && seen["overage"] < 10 {
		t.Errorf("only %d charges past a soft limit: the sequence does not exercise it", seen["overage"])
	}
}
