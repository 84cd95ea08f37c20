package plans

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/quota"
)

func TestOverrides(t *testing.T) {
	free, _ := Defaults().Lookup("free")
	free.Quota.History = time.Hour // as a plans file's "history" would make it
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
			limits: append([]quota.Limit{{Name: "burst", Max: 500, Window: 5 * time.Second}}, free.Quota.Limits[1:]...), inFlight: free.MaxInFlight},
		{name: "add a cap", json: `{"limits": [{"name": "hour", "max": 2000, "window": "1h"}], "max_in_flight": 0}`,
			limits: append(slices.Clone(free.Quota.Limits), quota.Limit{Name: "hour", Max: 2000, Window: time.Hour}), inFlight: zero},
		{name: "in flight", json: `{"max_in_flight": 8}`, limits: free.Quota.Limits, inFlight: eight},
		{name: "bad max", json: `{"limits": [{"name": "burst", "max": 0, "window": "5s"}]}`, field: "limits[0].max"},
		{name: "bad window", json: `{"limits": [{"name": "hour", "max": 5, "window": "1h"}, {"name": "x", "max": 5, "window": "soon"}]}`, field: "limits[1].window"},
		{name: "sub-millisecond window", json: `{"limits": [{"name": "x", "max": 5, "window": "1500us"}]}`, field: "limits[0].window"},
		{name: "bad name", json: `{"limits": [{"name": "a b", "max": 5, "window": "1s"}]}`, field: "limits[0].name"},
		{name: "lower the month", json: `{"limits": [{"name": "month", "max": 5000, "period": "month"}]}`,
			limits: append(slices.Clone(free.Quota.Limits[:2]), quota.PerMonth(5000)), inFlight: free.MaxInFlight},
		{name: "add a day", json: `{"limits": [{"name": "day", "max": 500, "period": "day"}]}`,
			limits: append(slices.Clone(free.Quota.Limits), quota.PerDay(500)), inFlight: free.MaxInFlight},
		{name: "a year", json: `{"limits": [{"name": "year", "max": 5, "period": "year"}]}`, field: "limits[0].period"},
		{name: "a period with a window", json: `{"limits": [{"name": "day", "max": 5, "period": "day", "window": "1h"}]}`, field: "limits[0].window"},
		{name: "twice", json: `{"limits": [{"name": "x", "max": 5, "window": "1s"}, {"name": "x", "max": 6, "window": "1s"}]}`, field: "limits[1].name"},
		{name: "longer than the history", json: `{"limits": [{"name": "day", "max": 5, "window": "24h"}]}`, field: "limits[0].window"},
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
			var fe *param.Error
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

// An override keeps its plan's time zone: a day of a plan in
// Pacific/Kiritimati (UTC+14) starts at 10:00Z, also for a key whose only
// override is an in-flight limit. Rebuilt without it, the day started at
// 00:00Z.
func TestOverridesKeepTheTimeZone(t *testing.T) {
	s, err := Parse([]byte(`{"plans": [{"name": "island", "max_radius_m": 1000, "time_zone": "Pacific/Kiritimati",
		"limits": [{"name": "burst", "max": 100, "window": "1s"}, {"name": "day", "max": 10, "period": "day"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	three := 3
	p, err := s.KeyPlan("island", Overrides{MaxInFlight: &three})
	if err != nil {
		t.Fatal(err)
	}
	if p.Quota.Location == nil || p.Quota.Location.String() != "Pacific/Kiritimati" {
		t.Fatalf("the overridden plan's location is %v, want Pacific/Kiritimati", p.Quota.Location)
	}
	if p.Quota.History != s.History() || s.History() != time.Minute {
		t.Errorf("history %s, the set's %s; want both 1m, the compiled-in plans' minute", p.Quota.History, s.History())
	}
	// 10 units at 09:59Z fill the day that began at 10:00Z the day before;
	// at 10:00Z a new day starts and 10 more fit.
	now := time.Date(2026, 12, 1, 9, 59, 0, 0, time.UTC)
	store := quota.NewMemory(func() time.Time { return now })
	ctx := t.Context()
	if d, err := store.Charge(ctx, "k", p.Quota, 10); err != nil || !d.Allowed {
		t.Fatalf("the first 10: %+v, %v", d, err)
	}
	now = now.Add(30 * time.Second)
	if d, err := store.Charge(ctx, "k", p.Quota, 1); err != nil || d.Allowed {
		t.Fatalf("at 09:59:30Z, in the same Kiritimati day, 1 more was admitted (%v)", err)
	}
	now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if d, err := store.Charge(ctx, "k", p.Quota, 10); err != nil || !d.Allowed {
		t.Fatalf("at 10:00Z, a new Kiritimati day, 10 were refused: %+v, %v", d, err)
	}
}

// Every plan a key may be on keeps the longest window among them, or the
// plans file's history if longer; the anonymous plan keeps its own.
func TestSetHistory(t *testing.T) {
	for _, tc := range []struct {
		file string
		want time.Duration
	}{
		{``, time.Minute},
		{`{"plans": [{"name": "big", "max_radius_m": 1, "limits": [{"name": "h", "max": 9, "window": "2h"}]}]}`, 2 * time.Hour},
		{`{"history": "24h", "plans": [{"name": "big", "max_radius_m": 1, "limits": [{"name": "h", "max": 9, "window": "2h"}]}]}`, 24 * time.Hour},
	} {
		s := Defaults()
		if tc.file != "" {
			var err error
			if s, err = Parse([]byte(tc.file)); err != nil {
				t.Fatal(err)
			}
		}
		if s.History() != tc.want {
			t.Errorf("%s: history %s, want %s", tc.file, s.History(), tc.want)
		}
		for _, p := range s.All() {
			want := tc.want
			if p.Name == Anonymous {
				want = 0
			}
			if p.Quota.History != want {
				t.Errorf("%s: plan %q keeps %s, want %s", tc.file, p.Name, p.Quota.History, want)
			}
		}
	}
	if _, err := Parse([]byte(`{"history": "soon", "plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 1, "window": "1s"}]}]}`)); err == nil ||
		!strings.Contains(err.Error(), `history "soon"`) {
		t.Errorf("a bad history: %v", err)
	}
}

func TestKeyPlan(t *testing.T) {
	s := Defaults()
	for _, tc := range []struct {
		plan, json, field string
	}{
		{"free", ``, ""},
		{"pro", `{"max_in_flight": 4}`, ""},
		{"gold", ``, "plan"},
		{Anonymous, ``, "plan"},
		{"free", `{"limits": [{"name": "burst", "max": 0, "window": "5s"}]}`, "limits[0].max"},
		{"free", `{"limits": [{"name": "hour", "max": 10, "window": "1h"}]}`, "limits[0].window"},
	} {
		o, err := ParseOverrides([]byte(tc.json))
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.KeyPlan(tc.plan, o)
		var fe *param.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("KeyPlan(%q, %s): %v", tc.plan, tc.json, err)
		case tc.field == "" && p.Name != tc.plan:
			t.Errorf("KeyPlan(%q, %s) = plan %q", tc.plan, tc.json, p.Name)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("KeyPlan(%q, %s): error %v, want one naming %q", tc.plan, tc.json, err, tc.field)
		}
	}
}
