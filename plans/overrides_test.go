package plans

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tileapi/tileapi/field"
	"github.com/tileapi/tileapi/quota"
)

func TestOverrides(t *testing.T) {
	free, _ := Defaults().Lookup("free")
	eight, zero := 8, 0
	for _, tc := range []struct {
		name     string
		json     string
		limits   []quota.Limit
		inFlight int
		field    string // of the error, if any
	}{
		{name: "none", json: ``, limits: free.Quota.Limits, inFlight: free.MaxInFlight},
		{name: "raise a window", json: `{"limits": [{"name": "burst", "max": 500, "window": "5s"}]}`,
			limits: []quota.Limit{{Name: "burst", Max: 500, Window: 5 * time.Second}, free.Quota.Limits[1]}, inFlight: free.MaxInFlight},
		{name: "add a cap", json: `{"limits": [{"name": "hour", "max": 2000, "window": "1h"}], "max_in_flight": 0}`,
			limits: append(slices.Clone(free.Quota.Limits), quota.Limit{Name: "hour", Max: 2000, Window: time.Hour}), inFlight: zero},
		{name: "in flight", json: `{"max_in_flight": 8}`, limits: free.Quota.Limits, inFlight: eight},
		{name: "bad max", json: `{"limits": [{"name": "burst", "max": 0, "window": "5s"}]}`, field: "limits[0].max"},
		{name: "bad window", json: `{"limits": [{"name": "hour", "max": 5, "window": "1h"}, {"name": "x", "max": 5, "window": "soon"}]}`, field: "limits[1].window"},
		{name: "sub-millisecond window", json: `{"limits": [{"name": "x", "max": 5, "window": "1500us"}]}`, field: "limits[0].window"},
		{name: "bad name", json: `{"limits": [{"name": "a b", "max": 5, "window": "1s"}]}`, field: "limits[0].name"},
		{name: "twice", json: `{"limits": [{"name": "x", "max": 5, "window": "1s"}, {"name": "x", "max": 6, "window": "1s"}]}`, field: "limits[1].name"},
		{name: "negative in flight", json: `{"max_in_flight": -1}`, field: "max_in_flight"},
		{name: "unknown field", json: `{"limit": []}`, field: "overrides"},
		{name: "not an object", json: `[1]`, field: "overrides"},
		{name: "trailing data", json: `{} {}`, field: "overrides"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseOverrides([]byte(tc.json))
			var p Plan
			if err == nil {
				p, err = free.With(o)
			}
			var fe *field.Error
			if tc.field != "" {
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Errorf("error %v, want one naming %q", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Quota.Limits, tc.limits) || p.MaxInFlight != tc.inFlight || p.Name != "free" || p.Quota.Name != "free" {
				t.Errorf("plan %+v, want limits %v and in flight %d", p, tc.limits, tc.inFlight)
			}
		})
	}
	if !slices.Equal(free.Quota.Limits, mustLookup(t, "free").Quota.Limits) {
		t.Error("With changed the plan it was called on")
	}
}

func mustLookup(t *testing.T, name string) Plan {
	p, ok := Defaults().Lookup(name)
	if !ok {
		t.Fatal(name)
	}
	return p
}
