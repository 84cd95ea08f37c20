package plans

import (
	"fmt"
	"slices"

	"github.com/tileapi/tileapi/quota"
)

// soften makes the limits of q named in names soft caps (quota.Limit.Soft)
// and every other one hard: past its max, a soft limit admits what the
// plan's sliding windows admit, as metered overage, where a hard one
// refuses. It reports, as one line naming it, a name q has no limit of or
// that names a sliding window: only a day or a month goes into overage.
func soften(q *quota.Plan, names []string) error {
	q.Limits = slices.Clone(q.Limits) // the caller's plan may share them
	for i := range q.Limits {
		q.Limits[i].Soft = false
	}
	for _, name := range names {
		i := slices.IndexFunc(q.Limits, func(l quota.Limit) bool { return l.Name == name })
		switch {
		case i < 0:
			return fmt.Errorf("overage %q: the plan has no limit %q", name, name)
		case q.Limits[i].Period == quota.Sliding:
			return fmt.Errorf("overage %q: limit %q is a sliding window; only a day or month limit goes on past its max as overage", name, name)
		}
		q.Limits[i].Soft = true
	}
	return nil
}

// softNames returns the names of q's soft limits, in plan order.
func softNames(q quota.Plan) []string {
	var names []string
	for _, l := range q.Limits {
		if l.Soft {
			names = append(names, l.Name)
		}
	}
	return names
}
