package plans

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tileapi/tileapi/quota"
)

// Alerts names, by the name of a period limit (a day or a month), the
// percents of its max whose crossing sends an alert: {"month": [50, 80,
// 100]}. Each list holds whole percents from 1 to 100, sorted and without
// repeats; an empty list sends none.
type Alerts map[string][]int

// String lists the thresholds by limit: "month 80%, 100%"; "none" when
// there are none.
func (a Alerts) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(a)) {
		if len(a[name]) == 0 {
			continue
		}
		pcts := make([]string, len(a[name]))
		for i, p := range a[name] {
			pcts[i] = strconv.Itoa(p) + "%"
		}
		parts = append(parts, name+" "+strings.Join(pcts, ", "))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// check reports the first threshold of a that q cannot take, as one line
// naming the limit and the value: a limit q lacks or that is a sliding
// window (an alert is one per period), or a percent out of 1..100 or out
// of order.
func (a Alerts) check(q quota.Plan) error {
	for _, name := range slices.Sorted(maps.Keys(a)) {
		i := slices.IndexFunc(q.Limits, func(l quota.Limit) bool { return l.Name == name })
		switch {
		case i < 0:
			return fmt.Errorf("alerts %q: the plan has no limit %q", name, name)
		case q.Limits[i].Period == quota.Sliding:
			return fmt.Errorf("alerts %q: limit %q is a sliding window; alerts are for a day or month limit", name, name)
		}
		for j, pct := range a[name] {
			switch {
			case pct < 1 || pct > 100:
				return fmt.Errorf("alerts %q: %d is not a percent from 1 to 100", name, pct)
			case j > 0 && pct <= a[name][j-1]:
				return fmt.Errorf("alerts %q: %d after %d: want the percents sorted, each once", name, pct, a[name][j-1])
			}
		}
	}
	return nil
}

// with returns a with the thresholds of o replacing those of the same
// limit; an empty list of o removes the limit's.
func (a Alerts) with(o Alerts) Alerts {
	if len(o) == 0 {
		return a
	}
	merged := maps.Clone(a)
	if merged == nil {
		merged = make(Alerts, len(o))
	}
	for name, pcts := range o {
		if len(pcts) == 0 {
			delete(merged, name)
		} else {
			merged[name] = pcts
		}
	}
	return merged
}
