package quota

import (
	"math"
	"time"
)

// limitUsage is what a store measures of one limit: the units used, the
// admit time of the oldest charge in the window (for a period limit, when
// the period ends) and, when the cost does not fit, the time at which it
// will (both -1 when there is none), in microseconds since the Unix epoch.
type limitUsage struct{ used, oldest, freeAt int64 }

// periodUsage is the usage of period limit l with used units counted in a
// period that ends at end, after a charge of cost that was admitted or not
// (when not, and it does not fit, it fits once the period is over).
func periodUsage(l Limit, used, end, cost int64, admitted bool) limitUsage {
	u := limitUsage{used: used, oldest: end, freeAt: -1}
	if !admitted && used+cost > l.Max {
		u.freeAt = end
	}
	return u
}

// decide builds a Decision from a store's measurements; both stores share it
// so they cannot differ in how they report.
//
// index is, for an admitted charge, the index of its record, counted since
// the identity's log began, and -1 when nothing was admitted.
func decide(identity string, plan Plan, cost int64, allowed bool, now, index int64, raw []limitUsage, periods *periodMarks) Decision {
	d := Decision{Allowed: allowed, Cost: cost, Limits: make([]LimitState, len(plan.Limits))}
	var freeAt int64 = -1
	for i, l := range plan.Limits {
		d.Limits[i] = newLimitState(l, raw[i].used, raw[i].oldest, now)
		if raw[i].freeAt > freeAt {
			freeAt, d.Binding = raw[i].freeAt, i
		}
	}
	if !allowed {
		d.RetryAfter = micros(freeAt - now)
		return d
	}
	d.Binding = leastRemaining(d.Limits)
	if index >= 0 {
		d.Receipt = Receipt{identity: identity, index: index, at: now, cost: cost, periods: periods}
	}
	return d
}

func newLimitState(l Limit, used, oldest, now int64) LimitState {
	s := LimitState{Limit: l, Used: used, Remaining: max(l.Max-used, 0)}
	switch {
	case l.Period != Sliding:
		s.ResetAfter = micros(oldest - now) // when the period ends
	case oldest >= 0:
		s.ResetAfter = micros(oldest + l.Window.Microseconds() - now)
	}
	return s
}

func leastRemaining(ls []LimitState) int {
	b := 0
	for i, s := range ls {
		if s.Remaining < ls[b].Remaining {
			b = i
		}
	}
	return b
}

func micros(us int64) time.Duration {
	if us < 0 {
		return 0
	}
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}
