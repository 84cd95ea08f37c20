package plans

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tileapi/tileapi/field"
	"github.com/tileapi/tileapi/quota"
)

// Overrides are one key's own changes to its plan, without a plan of its
// own: limits that replace the plan's limit of the same name (raise a
// window, lower a cap) or add to them (a new cap), and an in-flight limit.
// Their JSON form is stored with the key:
//
//	{"limits": [{"name": "burst", "max": 500, "window": "5s"},
//	            {"name": "hour", "max": 20000, "window": "1h"}],
//	 "max_in_flight": 16}
type Overrides struct {
	Limits []FileLimit `json:"limits,omitempty"`
	// MaxInFlight replaces the plan's MaxInFlight when set; 0 is no limit.
	MaxInFlight *int `json:"max_in_flight,omitempty"`
}

// IsZero reports whether o changes nothing.
func (o Overrides) IsZero() bool { return len(o.Limits) == 0 && o.MaxInFlight == nil }

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
		return Overrides{}, field.Invalid("overrides", "must be a JSON object with limits and max_in_flight: %v", err)
	}
	if d.More() {
		return Overrides{}, field.Invalid("overrides", "must be one JSON object")
	}
	return o, nil
}

// With returns p changed by o, validated: the quota plan keeps p's name
// and the order of its limits, a limit of o with a new name comes after
// them. A bad override is a *field.Error naming it, for example
// "limits[1].window".
func (p Plan) With(o Overrides) (Plan, error) {
	if o.IsZero() {
		return p, nil
	}
	q := quota.Plan{Name: p.Quota.Name, Limits: append([]quota.Limit(nil), p.Quota.Limits...)}
	seen := make(map[string]bool, len(o.Limits))
	for i, fl := range o.Limits {
		at := fmt.Sprintf("limits[%d]", i)
		l, err := fl.limit()
		if err != nil {
			return Plan{}, field.Invalid(at+".window", "%v", err)
		}
		if seen[l.Name] {
			return Plan{}, field.Invalid(at+".name", "limit %q is overridden twice", l.Name)
		}
		seen[l.Name] = true
		switch {
		case l.Max < 1 || l.Max > quota.MaxUnits:
			return Plan{}, field.Invalid(at+".max", "must be in [1, %d]", int64(quota.MaxUnits))
		case l.Window < time.Millisecond || l.Window%time.Millisecond != 0:
			return Plan{}, field.Invalid(at+".window", "must be a whole number of milliseconds, at least one")
		}
		if err := (quota.Plan{Name: p.Name, Limits: []quota.Limit{l}}).Validate(); err != nil {
			return Plan{}, field.Invalid(at+".name", "must be letters, digits, '-', '_' or '.', at most 64")
		}
		replaced := false
		for j := range q.Limits {
			if q.Limits[j].Name == l.Name {
				q.Limits[j], replaced = l, true
			}
		}
		if !replaced {
			q.Limits = append(q.Limits, l)
		}
	}
	if err := q.Validate(); err != nil {
		return Plan{}, field.Invalid("limits", "%v", err)
	}
	p.Quota = q
	if o.MaxInFlight != nil {
		if *o.MaxInFlight < 0 {
			return Plan{}, field.Invalid("max_in_flight", "must be 0 (no limit) or more")
		}
		p.MaxInFlight = *o.MaxInFlight
	}
	return p, nil
}

// limit is the quota limit fl describes.
func (fl FileLimit) limit() (quota.Limit, error) {
	w, err := time.ParseDuration(fl.Window)
	if err != nil {
		return quota.Limit{}, fmt.Errorf("window %q is not a duration such as \"5s\" or \"1h\"", fl.Window)
	}
	return quota.Limit{Name: fl.Name, Max: fl.Max, Window: w}, nil
}
