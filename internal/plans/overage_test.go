package plans

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/param"
)

// A plans file's overage names day and month limits of its plan, which
// become soft caps (and stay so for its customers); the others, and every
// limit of a plan without it, stay hard. A name the plan lacks or that
// names a sliding window is a one-line error naming the plan and it.
func TestOverageInPlansFile(t *testing.T) {
	for _, tc := range []struct {
		name, overage string
		soft          []string
		want          []string // in the error; none: valid
	}{
		{"month", `["month"]`, []string{"month"}, nil},
		{"day and month", `["day", "month"]`, []string{"day", "month"}, nil},
		{"none", `[]`, nil, nil},
		{"no such limit", `["year"]`, nil, []string{`"payg"`, `overage "year"`, "no limit"}},
		{"sliding window", `["minute"]`, nil, []string{`"payg"`, `overage "minute"`, "sliding window"}},
		{"not a list", `"month"`, nil, []string{"overage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(`{"plans": [{"name": "payg", "max_radius_m": 1000, "overage": ` + tc.overage + `,
				"limits": [{"name": "minute", "max": 100, "window": "1m"}, {"name": "day", "max": 1000, "period": "day"},
				           {"name": "month", "max": 10000, "period": "month"}]}]}`))
			if tc.want != nil {
				if err == nil {
					t.Fatalf("Parse accepted overage %s", tc.overage)
				}
				for _, w := range tc.want {
					if msg := err.Error(); !strings.Contains(msg, w) || strings.Contains(msg, "\n") {
						t.Errorf("error %q: want one line saying %q", msg, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, _ := s.Lookup("payg")
			if got := softNames(p.Quota); !slices.Equal(got, tc.soft) {
				t.Errorf("soft limits %v, want %v", got, tc.soft)
			}
			c, err := s.CustomerPlan("payg")
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range c.Limits {
				if l.Soft != p.Quota.Limits[i].Soft {
					t.Errorf("the customer's %s: soft %v, the plan's %v", l.Name, l.Soft, p.Quota.Limits[i].Soft)
				}
			}
		})
	}
	for _, p := range Defaults().All() {
		if soft := softNames(p.Quota); len(soft) > 0 {
			t.Errorf("compiled-in plan %s has soft limits %v: they keep hard caps", p.Name, soft)
		}
	}
}

// A key's overrides say which of its limits go into overage, replacing the
// plan's list ([] makes every limit hard); without them a soft limit stays
// soft under an overridden max. A bad list is a *param.Error naming
// "overage".
func TestOverageOverrides(t *testing.T) {
	s, err := Parse([]byte(`{"plans": [{"name": "payg", "max_radius_m": 1000, "overage": ["month"],
		"limits": [{"name": "minute", "max": 100, "window": "1m"}, {"name": "month", "max": 10000, "period": "month"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	list := func(names ...string) *[]string { return &names }
	for _, tc := range []struct {
		name  string
		o     Overrides
		soft  []string
		field string
	}{
		{"a free key goes on past its month", Overrides{Overage: list("month")}, []string{"month"}, ""},
		{"a new day", Overrides{Limits: []FileLimit{{Name: "day", Max: 50, Period: "day"}}, Overage: list("day")}, []string{"day"}, ""},
		{"hard caps", Overrides{Overage: list()}, nil, ""},
		{"unknown limit", Overrides{Overage: list("year")}, nil, "overage"},
		{"sliding window", Overrides{Overage: list("burst")}, nil, "overage"},
		{"a month made a window", Overrides{Limits: []FileLimit{{Name: "month", Max: 10, Window: "30s"}}}, nil, "overage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := "payg"
			if tc.name == "a free key goes on past its month" || tc.name == "sliding window" {
				plan = "free"
			}
			p, err := s.KeyPlan(plan, tc.o)
			var pe *param.Error
			switch {
			case tc.field != "":
				if !errors.As(err, &pe) || pe.Field != tc.field {
					t.Errorf("err = %v, want a *param.Error on %s", err, tc.field)
				}
			case err != nil:
				t.Fatal(err)
			case !slices.Equal(softNames(p.Quota), tc.soft):
				t.Errorf("soft limits %v, want %v", softNames(p.Quota), tc.soft)
			}
		})
	}
	// A lower month keeps the plan's overage.
	p, err := s.KeyPlan("payg", Overrides{Limits: []FileLimit{{Name: "month", Max: 500, Period: "month"}}})
	if err != nil || !p.Quota.Limits[1].Soft || p.Quota.Limits[1].Max != 500 {
		t.Errorf("a lower month: %+v, %v; want a soft month of 500", p.Quota.Limits, err)
	}
	// The plan's own limits are untouched by a key's overrides.
	if payg, _ := s.Lookup("payg"); !payg.Quota.Limits[1].Soft {
		t.Error("the plan's month went hard")
	}
	// The JSON form: [] is kept, meaning hard caps.
	o, err := ParseOverrides([]byte(`{"overage": []}`))
	if err != nil || o.Overage == nil || len(*o.Overage) != 0 || o.IsZero() {
		t.Errorf("overrides %+v, %v; want an empty overage list", o, err)
	}
}
