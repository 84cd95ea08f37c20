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
// (when not, and it does not fit, it fits once the period is over; a
// soft limit always fits).
func periodUsage(l Limit, used, end, cost int64, admitted bool) limitUsage {
	u := limitUsage{used: used, oldest: end, freeAt: -1}
	if !admitted && !l.Soft && used+cost > l.Max {
		u.freeAt = end
	}
	return u
}

// partOutcome is what a store did in one part of a charge (see
// Plan.parts): the index of the record it admitted, counted since the
// part's log began (-1 when nothing was admitted), and the calendar
// periods it counted the charge in.
type partOutcome struct {
	index int64
	marks *periodMarks
}

// decide builds a Decision from a store's measurements; both stores share it
// so they cannot differ in how they report.
//
// raw holds the usage of every limit of the decision, in its order (the
// plan's, then its Shared plans'); parts what was done in each part.
func decide(identity string, plan Plan, cost int64, allowed bool, now int64, raw []limitUsage, parts []partOutcome) Decision {
	d := Decision{Allowed: allowed, Cost: cost, Limits: make([]LimitState, len(raw))}
	var freeAt int64 = -1
	var overage int64 // the most units of cost past a soft limit
	i := 0
	for k := range parts {
		for _, l := range plan.partPlan(k).Limits {
			d.Limits[i] = newLimitState(l, raw[i].used, raw[i].oldest, now)
			if raw[i].freeAt > freeAt {
				freeAt, d.Binding = raw[i].freeAt, i
			}
			if l.Soft {
				overage = max(overage, min(cost, raw[i].used-l.Max))
			}
			i++
		}
	}
	if !allowed {
		d.RetryAfter = micros(freeAt - now)
		return d
	}
	d.Binding = leastRemaining(d.Limits)
	if parts[0].index < 0 {
		return d
	}
	receipt := func(k int) Receipt {
		return Receipt{identity: plan.partIdentity(identity, k), index: parts[k].index, at: now, cost: cost, periods: parts[k].marks}
	}
	d.Receipt = receipt(0)
	d.Receipt.overage = overage // an admitted charge's use includes its cost
	if len(parts) > 1 {
		d.Receipt.shared = new(sharedReceipts)
		for k := 1; k < len(parts); k++ {
			d.Receipt.shared[k-1] = receipt(k)
		}
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

// leastRemaining returns the index of the limit with the least remaining
// of those that can refuse: a soft limit never does, and every plan has a
// sliding window, which can.
func leastRemaining(ls []LimitState) int {
	b := -1
	for i, s := range ls {
		if !s.Limit.Soft && (b < 0 || s.Remaining < ls[b].Remaining) {
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
