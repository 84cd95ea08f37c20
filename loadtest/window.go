package loadtest

import (
	"slices"
	"time"
)

// WindowCheck is what CheckWindows found for one limit.
type WindowCheck struct {
	Limit Limit `json:"limit"`
	// Peak is the largest admitted cost in any trailing window of the
	// limit's length, and PeakAt (µs) the end of the first such window.
	Peak   int64 `json:"peak"`
	PeakAt int64 `json:"peak_at_us"`
	// Violations counts the windows, each ending at an admission, whose
	// admitted cost is above the limit's max; FirstViolation (µs) is the
	// end of the first, 0 if none.
	Violations     int   `json:"violations"`
	FirstViolation int64 `json:"first_violation_at_us,omitempty"`
}

// CheckWindows sums the admitted cost in every trailing window of l's
// length, (t - window, t] as the quota counts it, for every admit time t,
// which is where any window's sum reaches its maximum. It sorts adm.
func CheckWindows(adm []Admission, l Limit) WindowCheck {
	slices.SortFunc(adm, func(a, b Admission) int { return compareInt64(a.At, b.At) })
	w := l.Window.Microseconds()
	c := WindowCheck{Limit: l}
	var sum int64
	j := 0
	for i, a := range adm {
		sum += a.Cost
		if i+1 < len(adm) && adm[i+1].At == a.At {
			continue // a window ending at t holds every charge admitted at t
		}
		for j <= i && adm[j].At <= a.At-w {
			sum -= adm[j].Cost
			j++
		}
		if sum > c.Peak {
			c.Peak, c.PeakAt = sum, a.At
		}
		if sum > l.Max {
			if c.Violations == 0 {
				c.FirstViolation = a.At
			}
			c.Violations++
		}
	}
	return c
}

// TrailingSums samples, every step from start to end (µs), the cost of the
// events in the trailing window (t - window, t]: the curves the plots draw.
func TrailingSums(events []Admission, window time.Duration, start, end, step int64) []int64 {
	slices.SortFunc(events, func(a, b Admission) int { return compareInt64(a.At, b.At) })
	w := window.Microseconds()
	var out []int64
	var sum int64
	i, j := 0, 0
	for t := start; t <= end; t += step {
		for i < len(events) && events[i].At <= t {
			sum += events[i].Cost
			i++
		}
		for j < i && events[j].At <= t-w {
			sum -= events[j].Cost
			j++
		}
		out = append(out, sum)
	}
	return out
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
