package quota

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The reproduction: 15 units under a plan with an hour limit of 20,
// 1 unit under a plan without it once the 1 s window has passed, then the
// first plan again. A log kept only for the second plan's window forgot the
// 15, and 15 more were admitted: 31 in the hour. With the plans' History the
// hour still holds 16, and only 4 more fit.
func TestHistorySurvivesAPlanChange(t *testing.T) {
	history := time.Hour
	hourly := mustPlan(t, "hourly", Limit{Name: "second", Max: 100, Window: time.Second}, PerHour(20))
	hourly.History = history
	secondly := mustPlan(t, "secondly", Limit{Name: "second", Max: 100, Window: time.Second})
	secondly.History = history
	eachStore(t, func(t *testing.T, fx fixture) {
		if d := charge(t, fx.store, "k", hourly, 15); !d.Allowed {
			t.Fatal("the first 15 were refused")
		}
		fx.clock.Set(2 * time.Second)
		if d := charge(t, fx.store, "k", secondly, 1); !d.Allowed {
			t.Fatal("1 unit under the second plan was refused")
		}
		fx.clock.Set(4 * time.Second)
		d := charge(t, fx.store, "k", hourly, 15)
		if d.Allowed {
			t.Fatalf("15 more admitted under the hour limit of 20 that already holds 16 (used %v)", used(d))
		}
		if got := d.Limits[1].Used; got != 16 {
			t.Errorf("the hour holds %d, want 16", got)
		}
		if d := charge(t, fx.store, "k", hourly, 4); !d.Allowed {
			t.Errorf("4 units refused with 16 of 20 used (used %v)", used(d))
		}
	})
}

func TestHistoryValidated(t *testing.T) {
	for _, h := range []time.Duration{-time.Second, 1500 * time.Microsecond} {
		p := Plan{Name: "p", Limits: []Limit{PerSecond(1)}, History: h}
		if err := p.Validate(); err == nil {
			t.Errorf("history %s accepted", h)
		}
	}
}

// modelLog is the sliding-window quota as its definition reads: every
// admitted charge kept forever, each window summed over all of them. It
// forgets nothing, whatever the plan, so it is the reference a store must
// agree with across re-plans.
type modelLog struct{ at, cost []time.Duration }

func (m *modelLog) decide(now time.Duration, p Plan, cost int64) (bool, []int64) {
	used := make([]int64, len(p.Limits))
	ok := true
	for i, l := range p.Limits {
		for k, at := range m.at {
			if at > now-l.Window {
				used[i] += int64(m.cost[k])
			}
		}
		ok = ok && used[i]+cost <= l.Max
	}
	if ok {
		m.at, m.cost = append(m.at, now), append(m.cost, time.Duration(cost))
		for i := range used {
			used[i] += cost
		}
	}
	return ok, used
}

// Identities re-planned at random, on every step, between plans whose
// longest windows differ (0.3 s to 10 s), each plan given the longest of
// them as its History: every store, Redis on a single node and on a
// cluster and Memory, decides each charge as the model that forgets
// nothing does, and reports the same usage.
func TestHistoryDifferentialReplans(t *testing.T) {
	ps := []Plan{
		mustPlan(t, "short", Limit{Name: "a", Max: 6, Window: 300 * time.Millisecond}),
		mustPlan(t, "mid", Limit{Name: "a", Max: 8, Window: 300 * time.Millisecond}, Limit{Name: "b", Max: 25, Window: 2 * time.Second}),
		mustPlan(t, "long", Limit{Name: "b", Max: 20, Window: 2 * time.Second}, Limit{Name: "c", Max: 60, Window: 10 * time.Second}),
		mustPlan(t, "longest-only", Limit{Name: "c", Max: 45, Window: 10 * time.Second}),
	}
	var history time.Duration
	for _, p := range ps {
		history = max(history, p.longestWindow())
	}
	for i := range ps {
		ps[i].History = history
	}
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(21, 4))
		models := map[string]*modelLog{}
		var now time.Duration
		admitted, refused := 0, 0
		for step := range 2500 {
			switch r := rng.IntN(10); {
			case r < 7:
				now += time.Duration(rng.IntN(60)) * time.Millisecond
			case r < 9:
				now += time.Duration(rng.IntN(1500)) * time.Millisecond
			default:
				now += time.Duration(rng.IntN(12)) * time.Second
			}
			fx.clock.Set(now)
			id := fmt.Sprintf("id-%d", rng.IntN(3))
			p := ps[rng.IntN(len(ps))]
			cost := 1 + rng.Int64N(5)
			if models[id] == nil {
				models[id] = &modelLog{}
			}
			wantOK, wantUsed := models[id].decide(now, p, cost)
			d, err := fx.store.Charge(ctx, id, p, cost)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if d.Allowed != wantOK {
				t.Fatalf("step %d (t=%v %s plan %s cost %d): allowed = %v, the model says %v (store used %v, model %v)",
					step, now, id, p.Name, cost, d.Allowed, wantOK, used(d), wantUsed)
			}
			for i, l := range d.Limits {
				if l.Used != wantUsed[i] {
					t.Fatalf("step %d (t=%v %s plan %s): limit %q used = %d, the model says %d",
						step, now, id, p.Name, l.Limit.Name, l.Used, wantUsed[i])
				}
			}
			if d.Allowed {
				admitted++
			} else {
				refused++
			}
		}
		if admitted < 100 || refused < 100 {
			t.Errorf("%d admitted, %d refused: the sequence does not exercise both", admitted, refused)
		}
	})
}
