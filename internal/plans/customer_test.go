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

// A customer's plan is a key plan's limits, renamed, with the time zone
// and the set's history; the anonymous plan, an unknown one and one whose
// renamed limits cannot be enforced are refused naming "plan".
func TestCustomerPlan(t *testing.T) {
	s, err := Parse([]byte(`{"history": "2h", "plans": [
		{"name": "team", "max_radius_m": 1000, "time_zone": "Europe/Paris",
		 "limits": [{"name": "minute", "max": 50, "window": "1m"}, {"name": "month", "max": 9000, "period": "month"}]},
		{"name": "long", "max_radius_m": 1000, "limits": [{"name": "` + strings.Repeat("x", 60) + `", "max": 5, "window": "1s"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.CustomerPlan("team")
	if err != nil {
		t.Fatal(err)
	}
	want := []quota.Limit{{Name: "customer.minute", Max: 50, Window: time.Minute}, {Name: "customer.month", Max: 9000, Period: quota.Month}}
	if q.Name != "team" || !slices.Equal(q.Limits, want) || q.History != 2*time.Hour || q.Location.String() != "Europe/Paris" {
		t.Errorf("customer plan = %+v, want team's limits %v, its zone and 2h of history", q, want)
	}
	if team, _ := s.Lookup("team"); team.Quota.Limits[0].Name != "minute" {
		t.Errorf("the key plan's limits were renamed too: %v", team.Quota.Limits)
	}
	for _, name := range []string{"anonymous", "nope", "", "long"} {
		var pe *param.Error
		if _, err := s.CustomerPlan(name); !errors.As(err, &pe) || pe.Field != "plan" {
			t.Errorf("customer plan %q: %v, want an error naming plan", name, err)
		} else if name != "long" && !strings.Contains(pe.Error(), "a customer may be on free, long, pro, team") {
			t.Errorf("customer plan %q: %v, want the plans there are", name, err)
		}
	}
}

// A plan or an override may not name a limit as a customer's limits or a
// token's budget are named: they are charged beside the key's own.
func TestReservedLimitNames(t *testing.T) {
	for _, name := range []string{"token", "customer.minute", "customer."} {
		if _, err := Parse([]byte(`{"plans": [{"name": "x", "max_radius_m": 1000, "limits": [{"name": "` + name + `", "max": 5, "window": "1s"}]}]}`)); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("a plan with a limit %q: %v, want it refused as reserved", name, err)
		}
		free, _ := Defaults().Lookup("free")
		var pe *param.Error
		if _, err := free.With(Overrides{Limits: []FileLimit{{Name: name, Max: 5, Window: "1s"}}}); !errors.As(err, &pe) || pe.Field != "limits[0].name" {
			t.Errorf("an override of a limit %q: %v, want it refused naming limits[0].name", name, err)
		}
	}
	if _, err := Parse([]byte(`{"plans": [{"name": "x", "max_radius_m": 1000, "limits": [{"name": "tokens", "max": 5, "window": "1s"}]}]}`)); err != nil {
		t.Errorf("a limit named tokens: %v", err)
	}
}
