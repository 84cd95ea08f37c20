package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/quota"
)

// Overrides are one key's own changes to its plan, without a plan of its
// own: limits that replace the plan's limit of the same name (raise a
// window, lower a month) or add to them (a new cap), and an in-flight
// limit, alert thresholds, and which period limits go into overage.
// Their JSON form is stored with the key:
//
//	{"limits": [{"name": "burst", "max": 500, "window": "5s"},
//	            {"name": "month", "max": 20000, "period": "month"}],
//	 "max_in_flight": 16, "alerts": {"month": [50, 90]},
//	 "overage": ["month"]}
type Overrides struct {
	Limits []FileLimit `json:"limits,omitempty"`
	// MaxInFlight replaces the plan's MaxInFlight when set; 0 is no limit.
	MaxInFlight *int `json:"max_in_flight,omitempty"`
	// Alerts replace the plan's thresholds of each limit they name; an
	// empty list sends none for it.
	Alerts Alerts `json:"alerts,omitempty"`
	// Overage, when set, replaces the plan's list of the day and month
	// limits that go on past their max as metered overage (FilePlan's
	// Overage): ["month"] lets the key's month go on, [] makes every limit
	// a hard cap.
	Overage *[]string `json:"overage,omitempty"`
}

// IsZero reports whether o changes nothing.
func (o Overrides) IsZero() bool {
	return len(o.Limits) == 0 && o.MaxInFlight == nil && len(o.Alerts) == 0 && o.Overage == nil
}

// ParseOverrides reads the JSON form of Overrides, refusing unknown fields
// and trailing data. An empty b is no overrides.
func ParseOverrides(b []byte) (Overrides, error) {
	var o Overrides
	if len(bytes.TrimSpace(b)) == 0 {
		return o, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&o); err != nil {
		return Overrides{}, param.Invalid("overrides", "must be a JSON object with limits, max_in_flight, alerts and overage: %v", err)
	}
	if d.More() {
		return Overrides{}, param.Invalid("overrides", "must be one JSON object")
	}
	return o, nil
}

// With returns p changed by o, validated by quota.NewPlan: the quota plan
// keeps p's name, time zone, history and the order of its limits, and a
// limit of o with a new name comes after them. The limits p lets go into
// overage still do, under a new max too, unless o says which do. A window
// longer than p's history is refused: the key's charges would outlast
// what its other plans keep. A bad override is a *param.Error naming it,
// for example "limits[1].window" or "overage".
func (p Plan) With(o Overrides) (Plan, error) {
	if o.IsZero() {
		return p, nil
	}
	limits := slices.Clone(p.Quota.Limits)
	soft := softNames(p.Quota)
	if o.Overage != nil {
		soft = *o.Overage
	}
	seen := make(map[string]int, len(o.Limits)) // name -> index in o.Limits
	for i, fl := range o.Limits {
		at := fmt.Sprintf("limits[%d]", i)
		l, err := fl.limit()
		if err != nil {
			return Plan{}, param.Invalid(at+".window", "%v", err)
		}
		if _, twice := seen[l.Name]; twice {
			return Plan{}, param.Invalid(at+".name", "limit %q is overridden twice", l.Name)
		}
		if err := reserved(l.Name); err != nil {
			return Plan{}, param.Invalid(at+".name", "%v", err)
		}
		seen[l.Name] = i
		if j := slices.IndexFunc(limits, func(x quota.Limit) bool { return x.Name == l.Name }); j >= 0 {
			limits[j] = l
		} else {
			limits = append(limits, l)
		}
	}
	q, err := quota.NewPlan(p.Quota.Name, limits...)
	if err != nil {
		var le *quota.LimitError
		if i, ok := seen[limitAt(err, &le)]; ok {
			return Plan{}, param.Invalid(fmt.Sprintf("limits[%d].%s", i, le.Field), "%s", le.Reason)
		}
		return Plan{}, param.Invalid("limits", "%v", err)
	}
	if err := soften(&q, soft); err != nil {
		return Plan{}, param.Invalid("overage", "%v", err)
	}
	for i, fl := range o.Limits {
		if l, _ := fl.limit(); p.Quota.History > 0 && l.Window > p.Quota.History {
			return Plan{}, param.Invalid(fmt.Sprintf("limits[%d].window", i),
				"%s is longer than the plans' history of %s (the \"history\" of the plans file)", l.Window, p.Quota.History)
		}
	}
	q.Location, q.History = p.Quota.Location, p.Quota.History
	p.Quota = q
	if o.MaxInFlight != nil {
		if *o.MaxInFlight < 0 {
			return Plan{}, param.Invalid("max_in_flight", "must be 0 (no limit) or more")
		}
		p.MaxInFlight = *o.MaxInFlight
	}
	p.Alerts = p.Alerts.with(o.Alerts)
	if err := p.Alerts.check(p.Quota); err != nil {
		return Plan{}, param.Invalid("alerts", "%v", err)
	}
	return p, nil
}

// limitAt returns the name of the limit err is about, setting *le, or ""
// when err is not a *quota.LimitError.
func limitAt(err error, le **quota.LimitError) string {
	if !errors.As(err, le) {
		return ""
	}
	return (*le).Limit
}

// limit is the quota limit fl describes: a sliding window, or a calendar
// period without one.
func (fl FileLimit) limit() (quota.Limit, error) {
	if fl.Period != "" {
		if fl.Window != "" {
			return quota.Limit{}, fmt.Errorf("a %s limit has no window", fl.Period)
		}
		return quota.Limit{Name: fl.Name, Max: fl.Max, Period: quota.Period(fl.Period)}, nil
	}
	w, err := time.ParseDuration(fl.Window)
	if err != nil {
		return quota.Limit{}, fmt.Errorf("window %q is not a duration such as \"5s\" or \"1h\"", fl.Window)
	}
	return quota.Limit{Name: fl.Name, Max: fl.Max, Window: w}, nil
}
