package plans

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/param"
)

// A plans file's alerts are checked: each names a period limit of its
// plan, with percents from 1 to 100, sorted, each once; the error is one
// line naming the plan, the limit and the value at fault.
func TestAlertsInPlansFile(t *testing.T) {
	for _, tc := range []struct {
		name, alerts string
		want         []string // in the error; none: valid
	}{
		{"valid", `{"month": [50, 80, 100]}`, nil},
		{"one", `{"day": [100]}`, nil},
		{"none", `{"month": []}`, nil},
		{"zero", `{"month": [0, 50]}`, []string{`"big"`, `"month"`, "0 is not a percent"}},
		{"over 100", `{"month": [50, 101]}`, []string{`"big"`, `"month"`, "101 is not a percent"}},
		{"unsorted", `{"month": [80, 50]}`, []string{`"big"`, `"month"`, "50 after 80"}},
		{"twice", `{"month": [50, 50]}`, []string{`"big"`, `"month"`, "50 after 50"}},
		{"no such limit", `{"year": [50]}`, []string{`"big"`, `"year"`}},
		{"sliding window", `{"minute": [50]}`, []string{`"big"`, `"minute"`, "sliding"}},
		{"not whole", `{"month": [50.5]}`, []string{"alerts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(`{"plans": [{"name": "big", "max_radius_m": 1000, "alerts": ` + tc.alerts + `,
				"limits": [{"name": "minute", "max": 100, "window": "1m"}, {"name": "day", "max": 1000, "period": "day"},
				           {"name": "month", "max": 10000, "period": "month"}]}]}`))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				p, _ := s.Lookup("big")
				if len(p.Alerts) != 1 {
					t.Errorf("alerts = %v", p.Alerts)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted alerts %s", tc.alerts)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
		})
	}
}

// A key's overrides replace the alerts of the limits they name and keep the
// others; bad ones are a *param.Error naming "alerts".
func TestAlertsOverrides(t *testing.T) {
	s := Defaults()
	p, err := s.KeyPlan("free", Overrides{Alerts: Alerts{"month": {50, 90}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Alerts["month"]; !slices.Equal(got, []int{50, 90}) {
		t.Errorf("month alerts = %v, want [50 90]", got)
	}
	if free, _ := s.Lookup("free"); !slices.Equal(free.Alerts["month"], []int{80, 100}) {
		t.Errorf("the plan's own alerts changed: %v", free.Alerts)
	}
	for _, bad := range []Alerts{{"month": {100, 50}}, {"month": {200}}, {"burst": {50}}} {
		_, err := s.KeyPlan("free", Overrides{Alerts: bad})
		var pe *param.Error
		if !errors.As(err, &pe) || pe.Field != "alerts" {
			t.Errorf("alerts %v: err = %v, want a *param.Error on alerts", bad, err)
		}
	}
	// A limit the overrides turn into a sliding window takes its alerts
	// with it only if they go too.
	if _, err := s.KeyPlan("free", Overrides{Limits: []FileLimit{{Name: "month", Max: 10, Window: "30s"}}}); err == nil {
		t.Error("a month limit made a window kept its month alerts")
	}
	if _, err := s.KeyPlan("free", Overrides{Limits: []FileLimit{{Name: "month", Max: 10, Window: "30s"}}, Alerts: Alerts{"month": {}}}); err != nil {
		t.Errorf("alerts turned off with the limit made a window: %v", err)
	}
}
