package history

import (
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// script builds a history by hand, times in offsets from a base.
type script struct {
	h    History
	base time.Time
}

func newScript() *script {
	return &script{base: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (s *script) t(d time.Duration) time.Time { return s.base.Add(d) }

// admit records a charge admitted at at, its call 10 µs either side;
// used, if given, is the usage it reported.
func (s *script) admit(identity string, p quota.Plan, cost int64, at time.Duration, used ...int64) int {
	c := Charge{ID: len(s.h.Charges), Identity: identity, Plan: p, Cost: cost, Outcome: Made, At: s.t(at),
		Sent: s.t(at - 10*time.Microsecond), Answered: s.t(at + 10*time.Microsecond)}
	for _, l := range p.Limits {
		if l.Period != quota.Sliding {
			c.Periods = append(c.Periods, quota.PeriodKey{Limit: l.Name, Start: periodStart(l.Period, c.At, p.Location)})
		}
	}
	if len(used) > 0 {
		c.Used = used
	}
	s.h.Charges = append(s.h.Charges, c)
	return c.ID
}

// call records a charge not admitted, called from sent to answered.
func (s *script) call(identity string, p quota.Plan, cost int64, o Outcome, sent, answered time.Duration) int {
	c := Charge{ID: len(s.h.Charges), Identity: identity, Plan: p, Cost: cost, Outcome: o, Sent: s.t(sent), Answered: s.t(answered)}
	if o == NotMade {
		c.Used = make([]int64, len(p.Limits))
	}
	s.h.Charges = append(s.h.Charges, c)
	return c.ID
}

func (s *script) give(charge int, actual int64, o Outcome, sent, answered time.Duration) {
	s.h.Givebacks = append(s.h.Givebacks, Giveback{Charge: charge, Actual: actual, Outcome: o, Sent: s.t(sent), Answered: s.t(answered)})
}

func (s *script) fault(start, end time.Duration) {
	s.h.Faults = append(s.h.Faults, Fault{Kind: "restart", Start: s.t(start), End: s.t(end)})
}

func plan(t *testing.T, name string, limits ...quota.Limit) quota.Plan {
	t.Helper()
	p, err := quota.NewPlan(name, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const ms = time.Millisecond

// tally is what a case expects of a report.
type tally struct {
	violations, miscounts, spurious, clock, ties, uncertain, overshoots int
}

func tallyOf(r Report) tally {
	return tally{r.Violations, r.Miscounts, r.SpuriousDenials, r.ClockAnomalies, r.Ties, r.UncertainTies, r.Overshoots}
}

// Hand-made histories, each with a known answer: the checker reports what
// breaks the model, and nothing that does not, at the boundaries of
// windows, refunds, faults and ties.
func TestCheckHandMade(t *testing.T) {
	ten := plan(t, "ten", quota.Limit{Name: "a", Max: 10, Window: time.Second})
	long := plan(t, "long", quota.Limit{Name: "c", Max: 10, Window: 3 * time.Second})
	short := plan(t, "short", quota.Limit{Name: "a", Max: 100, Window: 100 * ms})
	twenty := plan(t, "twenty", quota.Limit{Name: "a", Max: 20, Window: time.Second})
	daily := plan(t, "daily", quota.Limit{Name: "a", Max: 100, Window: time.Second}, quota.Limit{Name: "day", Max: 10, Period: quota.Day})
	softDaily := plan(t, "soft-daily", quota.Limit{Name: "a", Max: 100, Window: time.Second}, quota.Limit{Name: "day", Max: 10, Period: quota.Day, Soft: true})
	for _, tc := range []struct {
		name  string
		opt   Options
		build func(s *script)
		want  tally
	}{
		{"within the limit", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", ten, 4, 100*ms)
		}, tally{}},
		{"one over-admission", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
		}, tally{violations: 1}},
		{"other identities do not count", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("j", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
		}, tally{}},
		{"the oldest leaves at exactly one window", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, time.Second)
		}, tally{}},
		{"one microsecond sooner it is still in", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, time.Second-time.Microsecond)
		}, tally{violations: 1}},
		{"a refund sent before frees its units", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.give(id, 0, Made, 50*ms, 60*ms)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
		}, tally{}},
		{"a refund sent after does not", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
			s.give(id, 0, Made, 250*ms, 260*ms)
		}, tally{violations: 1}},
		{"a refund that found nothing frees nothing", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.give(id, 0, NotMade, 50*ms, 60*ms)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
		}, tally{violations: 1}},
		{"a refund that failed on its way may have been made", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.give(id, 0, Unknown, 50*ms, 60*ms)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
		}, tally{}},
		{"a settlement frees the difference", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.give(id, 3, Made, 50*ms, 60*ms)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
		}, tally{}},
		{"a fault before forgets the window", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", ten, 4, 100*ms)
			s.fault(150*ms, 160*ms)
			s.admit("k", ten, 3, 200*ms)
		}, tally{}},
		{"a fault after does not", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", ten, 4, 100*ms)
			s.admit("k", ten, 3, 200*ms)
			s.fault(250*ms, 260*ms)
		}, tally{violations: 1}},
		{"a change of plan must not forget", Options{}, func(s *script) {
			s.admit("k", long, 8, 0)
			s.admit("k", short, 5, 500*ms)
			s.admit("k", long, 5, time.Second)
		}, tally{violations: 1}},
		{"a period over its maximum", Options{}, func(s *script) {
			s.admit("k", daily, 6, 0)
			s.admit("k", daily, 6, 10*time.Second)
		}, tally{violations: 1}},
		{"a period over within what a fault may lose", Options{PeriodLoss: 10 * time.Second}, func(s *script) {
			s.admit("k", daily, 6, 0)
			s.fault(5*time.Second, 5100*ms)
			s.admit("k", daily, 6, 10*time.Second)
		}, tally{overshoots: 1}},
		{"a period over beyond what a fault may lose", Options{PeriodLoss: time.Second}, func(s *script) {
			s.admit("k", daily, 6, 0)
			s.fault(5*time.Second, 5100*ms)
			s.admit("k", daily, 6, 10*time.Second)
		}, tally{violations: 1}},
		{"a soft period past its maximum", Options{}, func(s *script) {
			s.admit("k", softDaily, 6, 0, 6, 6)
			s.admit("k", softDaily, 6, 10*time.Second, 6, 12)
		}, tally{}},
		{"a denial a soft period would not explain", Options{}, func(s *script) {
			s.admit("k", softDaily, 12, 0)
			s.call("k", softDaily, 6, NotMade, 100*ms, 110*ms)
		}, tally{spurious: 1}},
		{"usage reported below the model's", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0, 6)
			s.admit("k", ten, 3, 100*ms, 3)
		}, tally{miscounts: 1}},
		{"usage reported as the model's", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0, 6)
			s.admit("k", ten, 3, 100*ms, 9)
		}, tally{}},
		{"a tie that breaks the limit in any order", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", ten, 6, 0)
		}, tally{violations: 1, ties: 1}},
		{"a tie that breaks it in one order", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.admit("k", twenty, 6, 0)
		}, tally{ties: 1, uncertain: 1}},
		{"a denial of what fits", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.call("k", ten, 3, NotMade, 100*ms, 110*ms)
		}, tally{spurious: 1}},
		{"a denial of what does not fit", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.call("k", ten, 5, NotMade, 100*ms, 110*ms)
		}, tally{}},
		{"a denial after a refund answered", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.give(id, 0, Made, 40*ms, 50*ms)
			s.call("k", ten, 6, NotMade, 100*ms, 110*ms)
		}, tally{spurious: 1}},
		{"a denial while a refund is on its way", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.give(id, 0, Made, 90*ms, 105*ms)
			s.call("k", ten, 6, NotMade, 100*ms, 110*ms)
		}, tally{}},
		{"a denial beside a charge that may have been made", Options{}, func(s *script) {
			s.admit("k", ten, 6, 0)
			s.call("k", ten, 4, Unknown, 20*ms, 30*ms)
			s.call("k", ten, 3, NotMade, 100*ms, 110*ms)
		}, tally{}},
		{"an admit time outside its call", Options{}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.h.Charges[id].Sent = s.t(time.Millisecond)
		}, tally{clock: 1}},
		{"within the skew", Options{Skew: 2 * ms}, func(s *script) {
			id := s.admit("k", ten, 6, 0)
			s.h.Charges[id].Sent = s.t(time.Millisecond)
		}, tally{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript()
			tc.build(s)
			r := Check(s.h, tc.opt)
			if got := tallyOf(r); got != tc.want {
				t.Errorf("got %+v, want %+v\n%s", got, tc.want, r)
			}
			if r.OK() != (tc.want.violations == 0 && tc.want.miscounts == 0 && tc.want.clock == 0) {
				t.Errorf("OK() = %v\n%s", r.OK(), r)
			}
		})
	}
}

// The mutation check: one over-admission slipped into a history the
// checker passes is reported, with the charge, the limit and the sums.
func TestCheckReportsAnOverAdmission(t *testing.T) {
	p := plan(t, "p", quota.Limit{Name: "a", Max: 10, Window: time.Second}, quota.Limit{Name: "b", Max: 30, Window: 10 * time.Second})
	s := newScript()
	for i := range 40 {
		// 2 units every 200 ms: 10 in a second, but 80 in 8 s under b's 30.
		s.admit("k", p, 2, time.Duration(i)*200*ms)
	}
	if r := Check(s.h, Options{}); r.OK() {
		t.Fatalf("a history of 80 units in 8 s under 30 per 10 s passed:\n%s", r)
	}

	s = newScript()
	var at time.Duration
	for range 40 {
		s.admit("k", p, 2, at)
		at += 700 * ms // 2 every 700 ms: 15 charges, 30 units, in any 10 s
	}
	if r := Check(s.h, Options{}); !r.OK() || r.WindowChecks != 80 {
		t.Fatalf("a history within the limits did not pass with 80 window checks:\n%s", r)
	}
	bad := s.admit("k", p, 1, at-700*ms+time.Microsecond)
	r := Check(s.h, Options{})
	if r.Violations != 1 || len(r.Examples) != 1 {
		t.Fatalf("one over-admission: got %d violations, want 1:\n%s", r.Violations, r)
	}
	v := r.Examples[0]
	if v.Kind != OverWindow || v.Charge.ID != bad || v.Limit.Name != "b" || v.Counted != 31 || v.Bound != 30 {
		t.Errorf("got %s, want charge %d over b with 31 of 30", v, bad)
	}
	if !strings.Contains(v.String(), "held at least 31, more than 30") {
		t.Errorf("the violation reads %q", v)
	}
}
