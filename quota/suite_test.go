package quota

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// The classic scenarios: 5 per 10 s admits five then denies; 10 per 1 s
// admits ten then denies two.
func TestClassicScenarios(t *testing.T) {
	tests := []struct {
		name    string
		limit   Limit
		calls   int
		admits  int
		retryAt time.Duration // of the first denial, from the first admit
	}{
		{"5 per 10s", Limit{Name: "w", Max: 5, Window: 10 * time.Second}, 6, 5, 10 * time.Second},
		{"10 per 1s", PerSecond(10), 12, 10, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, fx fixture) {
				p := mustPlan(t, "classic", tc.limit)
				var got []bool
				for i := 0; i < tc.calls; i++ {
					d := charge(t, fx.store, "client", p, 1)
					got = append(got, d.Allowed)
					if !d.Allowed && d.RetryAfter != tc.retryAt {
						t.Errorf("call %d: RetryAfter = %v, want %v", i, d.RetryAfter, tc.retryAt)
					}
				}
				want := make([]bool, tc.calls)
				for i := range tc.admits {
					want[i] = true
				}
				if !slices.Equal(got, want) {
					t.Errorf("allowed = %v, want %v", got, want)
				}
			})
		})
	}
}

func TestWindowSlides(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		p := mustPlan(t, "slide", Limit{Name: "w", Max: 5, Window: 10 * time.Second})
		for i := range 5 {
			fx.clock.Set(time.Duration(i) * time.Second)
			if d := charge(t, fx.store, "c", p, 1); !d.Allowed {
				t.Fatalf("charge at %ds denied", i)
			}
		}
		steps := []struct {
			at      time.Duration
			allowed bool
		}{
			{5 * time.Second, false},
			{10*time.Second - time.Millisecond, false}, // the first charge is still inside
			{10 * time.Second, true},                   // it has left: its unit is free again
			{10*time.Second + 500*time.Millisecond, false},
			{11 * time.Second, true},
			{25 * time.Second, true}, // everything has left
		}
		for _, s := range steps {
			fx.clock.Set(s.at)
			if d := charge(t, fx.store, "c", p, 1); d.Allowed != s.allowed {
				t.Errorf("at %v: allowed = %v, want %v (used %v)", s.at, d.Allowed, s.allowed, used(d))
			}
		}
		if d := peek(t, fx.store, "c", p); d.Limits[0].Used != 1 {
			t.Errorf("after the window slid past everything but one charge: used = %d, want 1", d.Limits[0].Used)
		}
	})
}

func TestIdentitiesAreIsolated(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		p := mustPlan(t, "iso", PerMinute(3))
		// Identities that differ only in bytes that matter to Redis keys.
		ids := []string{"alice", "alice ", "{alice}", "al{ice", "al}ice", "al%7Bice", "a\x00b", "a\xffb", "key:with:colons", "ünï"}
		for _, id := range ids {
			if d := charge(t, fx.store, id, p, 3); !d.Allowed {
				t.Errorf("%q: first charge denied: another identity's charge leaked in", id)
			}
		}
		for _, id := range ids {
			if d := charge(t, fx.store, id, p, 1); d.Allowed {
				t.Errorf("%q: charge past its own limit admitted", id)
			}
			if d := peek(t, fx.store, id, p); d.Limits[0].Used != 3 {
				t.Errorf("%q: used = %d, want 3", id, d.Limits[0].Used)
			}
		}
	})
}

func TestWeightedCosts(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		p := mustPlan(t, "weighted", PerMinute(10))
		steps := []struct {
			cost    int64
			allowed bool
			used    int64
		}{
			{4, true, 4},
			{4, true, 8},
			{3, false, 8}, // 11 > 10
			{2, true, 10},
			{1, false, 10},
		}
		for i, s := range steps {
			d := charge(t, fx.store, "w", p, s.cost)
			if d.Allowed != s.allowed || d.Limits[0].Used != s.used || d.Limits[0].Remaining != 10-s.used {
				t.Errorf("step %d cost %d: allowed %v used %d remaining %d, want %v %d %d",
					i, s.cost, d.Allowed, d.Limits[0].Used, d.Limits[0].Remaining, s.allowed, s.used, 10-s.used)
			}
		}
	})
}

// A charge denied by one limit is recorded in none.
func TestMultiLimitAllOrNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		p := mustPlan(t, "multi",
			Limit{Name: "burst", Max: 3, Window: time.Second},
			Limit{Name: "minute", Max: 10, Window: time.Minute})
		charge(t, fx.store, "m", p, 3)
		d := charge(t, fx.store, "m", p, 2)
		if d.Allowed {
			t.Fatal("charge over the burst limit admitted")
		}
		if d.Binding != 0 || d.BindingLimit().Limit.Name != "burst" {
			t.Errorf("binding limit = %q, want burst", d.BindingLimit().Limit.Name)
		}
		if got := used(d); !slices.Equal(got, []int64{3, 3}) {
			t.Errorf("used after the denial = %v, want [3 3]: the minute limit was charged", got)
		}
		// Every two seconds the burst is free again; the minute limit fills.
		for i, want := range []bool{true, true, false} {
			fx.clock.Set(time.Duration(2+2*i) * time.Second)
			d := charge(t, fx.store, "m", p, 3)
			if d.Allowed != want {
				t.Fatalf("charge %d: allowed = %v, want %v (used %v)", i, d.Allowed, want, used(d))
			}
		}
		d = peek(t, fx.store, "m", p)
		if got := used(d); !slices.Equal(got, []int64{0, 9}) {
			t.Errorf("used = %v, want [0 9]", got)
		}
		if d.BindingLimit().Limit.Name != "minute" {
			t.Errorf("binding limit = %q, want minute (least remaining)", d.BindingLimit().Limit.Name)
		}
	})
}

func TestDeniedIsNotRecorded(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		p := mustPlan(t, "deny", Limit{Name: "w", Max: 2, Window: 10 * time.Second})
		charge(t, fx.store, "d", p, 2)
		for i := range 50 {
			fx.clock.Set(time.Duration(i) * 100 * time.Millisecond)
			if charge(t, fx.store, "d", p, 1).Allowed {
				t.Fatal("charge over the limit admitted")
			}
		}
		// Had the denials been recorded, the window would still be full.
		fx.clock.Set(10 * time.Second)
		if d := charge(t, fx.store, "d", p, 2); !d.Allowed {
			t.Errorf("after the only admitted charge left: denied, used %v", used(d))
		}
	})
}

// The retry-after of a denial is exact to the microsecond: a retry then is
// admitted, one millisecond sooner is not. With weights, it is the moment
// enough weight has left, not the moment the oldest entry leaves.
func TestRetryAfterExact(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		p := mustPlan(t, "retry",
			Limit{Name: "ten", Max: 10, Window: 10 * time.Second},
			Limit{Name: "minute", Max: 100, Window: time.Minute})
		for _, c := range []struct {
			at   time.Duration
			cost int64
		}{{0, 3}, {1500 * time.Millisecond, 4}, {2*time.Second + 250*time.Microsecond, 3}} {
			fx.clock.Set(c.at)
			charge(t, fx.store, "r", p, c.cost)
		}
		fx.clock.Set(5 * time.Second)
		d := charge(t, fx.store, "r", p, 5)
		// Needs 5 units gone: 3 leave at 10 s, 4 more at 11.5 s.
		if want := 6500 * time.Millisecond; d.Allowed || d.RetryAfter != want {
			t.Fatalf("allowed %v retry-after %v, want denied and %v", d.Allowed, d.RetryAfter, want)
		}
		if d.BindingLimit().Limit.Name != "ten" {
			t.Errorf("binding limit = %q, want ten", d.BindingLimit().Limit.Name)
		}
		fx.clock.Set(11500*time.Millisecond - time.Millisecond)
		if charge(t, fx.store, "r", p, 5).Allowed {
			t.Error("admitted one millisecond before the retry-after")
		}
		fx.clock.Set(11500 * time.Millisecond)
		if d := charge(t, fx.store, "r", p, 5); !d.Allowed {
			t.Errorf("denied at the retry-after (used %v)", used(d))
		}
	})
}

func TestResetAfter(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		p := mustPlan(t, "reset", Limit{Name: "w", Max: 10, Window: 10 * time.Second})
		if d := peek(t, fx.store, "x", p); d.Limits[0].ResetAfter != 0 || d.Limits[0].Remaining != 10 {
			t.Errorf("empty window: %+v", d.Limits[0])
		}
		charge(t, fx.store, "x", p, 1)
		fx.clock.Set(3 * time.Second)
		d := charge(t, fx.store, "x", p, 1)
		if want := 7 * time.Second; d.Limits[0].ResetAfter != want {
			t.Errorf("ResetAfter = %v, want %v (when the oldest charge leaves)", d.Limits[0].ResetAfter, want)
		}
	})
}

func TestImpossibleAndInvalid(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		p := mustPlan(t, "small", Limit{Name: "burst", Max: 5, Window: time.Second}, PerMinute(50))
		_, err := fx.store.Charge(ctx, "i", p, 6)
		var tc *TooCostlyError
		if !errors.As(err, &tc) || !errors.Is(err, ErrTooCostly) || tc.Limit.Name != "burst" || tc.Cost != 6 {
			t.Errorf("cost above the burst max: err = %v, want a TooCostlyError naming burst", err)
		}
		for _, cost := range []int64{0, -1, MaxUnits + 1} {
			if _, err := fx.store.Charge(ctx, "i", p, cost); !errors.Is(err, ErrInvalid) {
				t.Errorf("cost %d: err = %v, want ErrInvalid", cost, err)
			}
		}
		if _, err := fx.store.Charge(ctx, "", p, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("empty identity: err = %v, want ErrInvalid", err)
		}
		for _, bad := range []Plan{
			{Name: "none"},
			{Name: "zero", Limits: []Limit{{Name: "a", Max: 0, Window: time.Second}}},
			{Name: "huge", Limits: []Limit{{Name: "a", Max: MaxUnits + 1, Window: time.Second}}},
			{Name: "submilli", Limits: []Limit{{Name: "a", Max: 1, Window: 1500 * time.Microsecond}}},
			{Name: "nowindow", Limits: []Limit{{Name: "a", Max: 1}}},
			{Name: "dup", Limits: []Limit{PerSecond(1), PerSecond(2)}},
			{Name: "badname", Limits: []Limit{{Name: "a b", Max: 1, Window: time.Second}}},
		} {
			if _, err := fx.store.Charge(ctx, "i", bad, 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("plan %q: err = %v, want ErrInvalid", bad.Name, err)
			}
		}
		if d := peek(t, fx.store, "i", p); d.Limits[0].Used != 0 {
			t.Errorf("refused charges were recorded: used %v", used(d))
		}
	})
}

func TestRefundSettleReset(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		p := mustPlan(t, "refund",
			Limit{Name: "burst", Max: 5, Window: time.Second},
			Limit{Name: "minute", Max: 20, Window: time.Minute})

		d := charge(t, fx.store, "f", p, 5)
		ok, err := fx.store.Refund(ctx, d.Receipt)
		if err != nil || !ok {
			t.Fatalf("Refund = %v, %v", ok, err)
		}
		if ok, _ := fx.store.Refund(ctx, d.Receipt); ok {
			t.Error("second refund of one receipt reported a change")
		}
		if got := used(peek(t, fx.store, "f", p)); !slices.Equal(got, []int64{0, 0}) {
			t.Errorf("after refund used = %v, want [0 0]", got)
		}

		// Settle lowers a charge; raising one is refused.
		d = charge(t, fx.store, "f", p, 5)
		if _, _, err := fx.store.Settle(ctx, d.Receipt, 6); !errors.Is(err, ErrInvalid) {
			t.Errorf("settle above the charge: err = %v, want ErrInvalid", err)
		}
		rc, ok, err := fx.store.Settle(ctx, d.Receipt, 2)
		if err != nil || !ok || rc.Cost() != 2 {
			t.Fatalf("Settle = %v, %v, %v", rc, ok, err)
		}
		if got := used(peek(t, fx.store, "f", p)); !slices.Equal(got, []int64{2, 2}) {
			t.Errorf("after settle used = %v, want [2 2]", got)
		}
		if _, ok, _ := fx.store.Settle(ctx, d.Receipt, 1); ok {
			t.Error("settling a superseded receipt reported a change")
		}

		// A charge that has left the burst window but not the minute one is
		// refunded from the minute limit only.
		fx.clock.Set(2 * time.Second)
		if ok, err := fx.store.Refund(ctx, rc); err != nil || !ok {
			t.Fatalf("late Refund = %v, %v", ok, err)
		}
		if got := used(peek(t, fx.store, "f", p)); !slices.Equal(got, []int64{0, 0}) {
			t.Errorf("after late refund used = %v, want [0 0]", got)
		}
		d = charge(t, fx.store, "f", p, 5)
		if !d.Allowed || !slices.Equal(used(d), []int64{5, 5}) {
			t.Errorf("charge after refunds: allowed %v used %v, want true [5 5]", d.Allowed, used(d))
		}

		if err := fx.store.Reset(ctx, "f"); err != nil {
			t.Fatal(err)
		}
		if got := used(peek(t, fx.store, "f", p)); !slices.Equal(got, []int64{0, 0}) {
			t.Errorf("after reset used = %v, want [0 0]", got)
		}
		if ok, _ := fx.store.Refund(ctx, d.Receipt); ok {
			t.Error("refund after reset reported a change")
		}
		if _, err := fx.store.Refund(ctx, Receipt{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("zero receipt: err = %v, want ErrInvalid", err)
		}
	})
}

// A receipt names one admitted charge: the identity, admit time and cost
// its accessors report. Two charges of one cost at different times have
// distinct receipts, and each gives back its own charge, once, and no
// other: refunding the older leaves the younger as the window's oldest. A
// receipt altered in any field, or moved to another identity, names no
// charge: it is refused (false, no error) and changes nothing. A denial
// has none.
func TestReceipts(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		p := mustPlan(t, "rc", Limit{Name: "minute", Max: 5, Window: time.Minute})
		a := charge(t, fx.store, "rc", p, 2)
		fx.clock.Set(10 * time.Second)
		other := charge(t, fx.store, "other", p, 2)
		fx.clock.Set(30 * time.Second)
		b := charge(t, fx.store, "rc", p, 2)
		if d := charge(t, fx.store, "rc", p, 2); d.Allowed || !d.Receipt.IsZero() {
			t.Fatalf("2 more of 5 with 4 used: allowed %v, receipt %+v; want a denial without one", d.Allowed, d.Receipt)
		}
		for _, c := range []struct {
			name     string
			rc       Receipt
			identity string
			at       time.Duration
		}{{"a", a.Receipt, "rc", 0}, {"b", b.Receipt, "rc", 30 * time.Second}, {"other", other.Receipt, "other", 10 * time.Second}} {
			if c.rc.IsZero() || c.rc.Identity() != c.identity || c.rc.Cost() != 2 || !c.rc.At().Equal(epoch.Add(c.at)) {
				t.Errorf("receipt %s: identity %q, cost %d, at %v; want %q, 2, %v",
					c.name, c.rc.Identity(), c.rc.Cost(), c.rc.At().Sub(epoch), c.identity, c.at)
			}
		}
		if a.Receipt == b.Receipt {
			t.Fatalf("two charges of one cost at different times share the receipt %+v", a.Receipt)
		}

		// Altered receipts: each field changed names no charge, though
		// "other" has one of the same cost and index at 10 s.
		alter := func(f func(*Receipt)) Receipt { rc := a.Receipt; f(&rc); return rc }
		for name, rc := range map[string]Receipt{
			"another identity": alter(func(rc *Receipt) { rc.identity = "other" }),
			"another index":    alter(func(rc *Receipt) { rc.index++ }),
			"a microsecond on": alter(func(rc *Receipt) { rc.at++ }),
			"a lower cost":     alter(func(rc *Receipt) { rc.cost = 1 }),
			"a higher cost":    alter(func(rc *Receipt) { rc.cost = 3 }),
		} {
			if ok, err := fx.store.Refund(ctx, rc); ok || err != nil {
				t.Errorf("refund with %s: %v, %v; want false, no error", name, ok, err)
			}
			if _, ok, err := fx.store.Settle(ctx, rc, 1); ok || err != nil {
				t.Errorf("settle with %s: %v, %v; want false, no error", name, ok, err)
			}
		}
		if u, o := peek(t, fx.store, "rc", p).Limits[0].Used, peek(t, fx.store, "other", p).Limits[0].Used; u != 4 || o != 2 {
			t.Fatalf("after altered receipts: used %d and %d, want 4 and 2 unchanged", u, o)
		}

		// a's refund gives back a's charge: b, 30 s younger, is now the
		// oldest, and still counts once a's time has left the window.
		if ok, err := fx.store.Refund(ctx, a.Receipt); !ok || err != nil {
			t.Fatalf("refund a: %v, %v", ok, err)
		}
		if ok, err := fx.store.Refund(ctx, a.Receipt); ok || err != nil {
			t.Errorf("refund a again: %v, %v; want false, no error", ok, err)
		}
		if l := peek(t, fx.store, "rc", p).Limits[0]; l.Used != 2 || l.ResetAfter != time.Minute {
			t.Errorf("after refunding a: used %d, reset after %v; want 2, %v (b's charge, made now)", l.Used, l.ResetAfter, time.Minute)
		}
		fx.clock.Set(61 * time.Second)
		if u := peek(t, fx.store, "rc", p).Limits[0].Used; u != 2 {
			t.Errorf("once a's time has left the window: used %d, want b's 2", u)
		}
		if ok, err := fx.store.Refund(ctx, b.Receipt); !ok || err != nil {
			t.Fatalf("refund b: %v, %v", ok, err)
		}
		if u, o := peek(t, fx.store, "rc", p).Limits[0].Used, peek(t, fx.store, "other", p).Limits[0].Used; u != 0 || o != 2 {
			t.Errorf("after refunding a and b: used %d and %d, want 0 and other's 2", u, o)
		}
	})
}

// Charges at one instant (a frozen clock, a clock stepped back) each keep
// their own entry, whatever their costs, and each can be refunded or
// settled on its own.
func TestSameInstant(t *testing.T) {
	eachStore(t, func(t *testing.T, fx fixture) {
		ctx := context.Background()
		p := mustPlan(t, "instant", Limit{Name: "w", Max: MaxUnits, Window: time.Second})
		costs := []int64{3, 3, 1, 255, 256, 3, 65536, 1 << 39}
		var receipts []Receipt
		var sum int64
		for _, c := range costs {
			d := charge(t, fx.store, "i", p, c)
			if !d.Allowed {
				t.Fatalf("cost %d denied", c)
			}
			sum += c
			if got := d.Limits[0].Used; got != sum {
				t.Fatalf("after cost %d: used %d, want %d", c, got, sum)
			}
			for _, r := range receipts {
				if r == d.Receipt {
					t.Fatalf("cost %d: receipt %+v given twice", c, r)
				}
			}
			receipts = append(receipts, d.Receipt)
		}
		// Refund the second 3 and settle the first one down to 1.
		if ok, err := fx.store.Refund(ctx, receipts[1]); err != nil || !ok {
			t.Fatalf("refund: %v %v", ok, err)
		}
		if _, ok, err := fx.store.Settle(ctx, receipts[0], 1); err != nil || !ok {
			t.Fatalf("settle: %v %v", ok, err)
		}
		if ok, _ := fx.store.Refund(ctx, receipts[1]); ok {
			t.Error("a refunded receipt was refunded again")
		}
		sum -= 3 + 2
		if got := peek(t, fx.store, "i", p).Limits[0].Used; got != sum {
			t.Errorf("after refund and settle: used %d, want %d", got, sum)
		}
		// A later charge at the same instant is still its own entry.
		charge(t, fx.store, "i", p, 3)
		if got := peek(t, fx.store, "i", p).Limits[0].Used; got != sum+3 {
			t.Errorf("after one more: used %d, want %d", got, sum+3)
		}
		fx.clock.Set(time.Second)
		if got := peek(t, fx.store, "i", p).Limits[0].Used; got != 0 {
			t.Errorf("a window later: used %d, want 0", got)
		}
	})
}

// A day limit counts exactly from midnight to midnight in the plan's time
// zone, beside its sliding window and in the same decision: all or
// nothing; a denial by it says when the day ends; refunds and settlements
// give back to it; the next day starts at zero.
func TestPeriods(t *testing.T) {
	ctx := context.Background()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, "daily", Limit{Name: "burst", Max: 8, Window: time.Second}, PerDay(10))
	p.Location = ny
	eachStore(t, func(t *testing.T, fx fixture) {
		// epoch is 03:00 in New York: 21 hours to midnight.
		toMidnight := 21 * time.Hour
		a := charge(t, fx.store, "p", p, 6)
		if st := a.Limits[1]; st.Used != 6 || st.Remaining != 4 || st.ResetAfter != toMidnight {
			t.Fatalf("day after 6: %+v, want 6 used and a reset at midnight", st)
		}
		// The burst denies 3 (6+3 > 8): nothing is counted in the day.
		if d := charge(t, fx.store, "p", p, 3); d.Allowed || d.BindingLimit().Limit.Name != "burst" {
			t.Fatalf("3 more in the burst: %+v", d)
		}
		// A refund gives back to the day too.
		if ok, err := fx.store.Refund(ctx, a.Receipt); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if u := peek(t, fx.store, "p", p).Limits[1]; u.Used != 0 {
			t.Fatalf("day after the refund: used %d, want 0", u.Used)
		}
		charge(t, fx.store, "p", p, 6)
		fx.clock.Set(2 * time.Second)
		// The day denies 5 (6+5 > 10), until midnight; nothing goes in the log.
		d := charge(t, fx.store, "p", p, 5)
		if d.Allowed || d.BindingLimit().Limit.Name != "day" || d.RetryAfter != toMidnight-2*time.Second {
			t.Fatalf("5 more in the day: %+v, want a denial by day until midnight", d)
		}
		if u := peek(t, fx.store, "p", p).Limits; u[0].Used != 0 || u[1].Used != 6 {
			t.Fatalf("usage after denials: %+v", u)
		}
		// A settlement gives back to the day too.
		b := charge(t, fx.store, "p", p, 4)
		if _, ok, err := fx.store.Settle(ctx, b.Receipt, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if u := peek(t, fx.store, "p", p).Limits[1]; u.Used != 7 {
			t.Fatalf("day after 4 settled to 1: used %d, want 7", u.Used)
		}
		charge(t, fx.store, "p", p, 3)
		// One microsecond before midnight in New York the day is full;
		// at midnight it starts again.
		fx.clock.Set(toMidnight - time.Microsecond)
		if d := charge(t, fx.store, "p", p, 2); d.Allowed {
			t.Fatalf("at 23:59:59.999999: %+v, want denied", d)
		}
		fx.clock.Set(toMidnight)
		d = charge(t, fx.store, "p", p, 8)
		if !d.Allowed || d.Limits[1].Used != 8 || d.Limits[1].ResetAfter != 24*time.Hour {
			t.Fatalf("at midnight: %+v, want 8 of a new day of 24 hours", d)
		}
		// Reset forgets the day's count too.
		if err := fx.store.Reset(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		if u := peek(t, fx.store, "p", p).Limits[1]; u.Used != 0 {
			t.Errorf("after Reset the day holds %d", u.Used)
		}
	})
}

// A month limit starts again on the first of the month, at midnight in the
// plan's time zone, whatever the month's length.
func TestMonthBoundary(t *testing.T) {
	p := mustPlan(t, "monthly", Limit{Name: "w", Max: 100, Window: time.Minute}, PerMonth(5))
	eachStore(t, func(t *testing.T, fx fixture) {
		endOfJanuary := time.Date(2027, time.February, 1, 0, 0, 0, 0, time.UTC).Sub(epoch)
		fx.clock.Set(endOfJanuary - time.Hour)
		charge(t, fx.store, "m", p, 5)
		if d := charge(t, fx.store, "m", p, 1); d.Allowed || d.RetryAfter != time.Hour {
			t.Fatalf("the month is full an hour before it ends: %+v", d)
		}
		fx.clock.Set(endOfJanuary)
		d := charge(t, fx.store, "m", p, 5)
		if !d.Allowed || d.Limits[1].ResetAfter != 28*24*time.Hour {
			t.Fatalf("on the first of February: %+v, want a month of 28 days", d)
		}
	})
}

// Plans with periods are validated.
func TestPeriodPlans(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits []Limit
	}{
		{"no sliding window", []Limit{PerDay(5)}},
		{"a window on a period", []Limit{PerMinute(5), {Name: "day", Max: 5, Window: time.Hour, Period: Day}}},
		{"an unknown period", []Limit{PerMinute(5), {Name: "year", Max: 5, Period: "year"}}},
		{"a name twice", []Limit{PerMinute(5), {Name: "minute", Max: 5, Period: Day}}},
		{"too many", []Limit{PerMinute(5), {Name: "a", Max: 1, Period: Day}, {Name: "b", Max: 1, Period: Day}, {Name: "c", Max: 1, Period: Day}, {Name: "d", Max: 1, Period: Day}, {Name: "e", Max: 1, Period: Day}}},
	} {
		if _, err := NewPlan(tc.name, tc.limits...); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := NewPlan("ok", PerMinute(5), PerDay(50), PerMonth(500)); err != nil {
		t.Error(err)
	}
}
