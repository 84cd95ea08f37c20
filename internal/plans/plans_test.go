package plans

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota"
)

func TestDefaults(t *testing.T) {
	s := Defaults()
	if got := s.Names(); !slices.Equal(got, []string{"anonymous", "free", "pro"}) {
		t.Errorf("Names() = %v", got)
	}
	free, ok := s.Lookup("free")
	if !ok || free.Quota.MaxCost() != 300 || free.MaxRadius != 20_000 {
		t.Errorf("free = %+v", free)
	}
	// Every default plan can afford its own largest radius and every tile.
	for _, p := range s.All() {
		if c := p.Cost.Radius(p.MaxRadius); c > p.Quota.MaxCost() {
			t.Errorf("%s: its max radius costs %d > its max cost %d", p.Name, c, p.Quota.MaxCost())
		}
		for layer := range p.Cost.Tiles {
			if c := p.Cost.Tile(layer, 0); c > p.Quota.MaxCost() {
				t.Errorf("%s: a z0 %s tile costs %d > its max cost %d", p.Name, layer, c, p.Quota.MaxCost())
			}
		}
	}
}

func TestLoad(t *testing.T) {
	write := func(t *testing.T, body string) string {
		path := filepath.Join(t.TempDir(), "plans.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s, err := Load(write(t, `{"plans": [
		{"name": "free", "max_radius_m": 1000, "limits": [{"name": "second", "max": 5, "window": "1s"}]},
		{"name": "tiny", "max_radius_m": 500, "limits": [{"name": "ten", "max": 5, "window": "10s"}],
		 "cost": {"radius_unit_m": 100, "hit_divisor": 2, "flat": 1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); !slices.Equal(got, []string{"anonymous", "free", "pro", "tiny"}) {
		t.Errorf("Names() = %v", got)
	}
	free, _ := s.Lookup("free")
	if want := []quota.Limit{{Name: "second", Max: 5, Window: time.Second}}; !slices.Equal(free.Quota.Limits, want) {
		t.Errorf("free limits = %v, want %v: the file must replace the default", free.Quota.Limits, want)
	}
	tiny, _ := s.Lookup("tiny")
	if tiny.Cost.RadiusUnit != 100 {
		t.Errorf("tiny cost = %+v", tiny.Cost)
	}
	if got := s.NoInFlightLimit(); !slices.Equal(got, []string{"free", "tiny"}) {
		t.Errorf("NoInFlightLimit() = %v, want [free tiny]: the plans of the file without max_in_flight", got)
	}
	if got := Defaults().NoInFlightLimit(); got != nil {
		t.Errorf("Defaults().NoInFlightLimit() = %v, want none", got)
	}

	for name, body := range map[string]string{
		"bad json":   `{"plans": [`,
		"no plans":   `{"plans": []}`,
		"bad window": `{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 1, "window": "soon"}]}]}`,
		"no limits":  `{"plans": [{"name": "x", "max_radius_m": 1, "limits": []}]}`,
		"no radius":  `{"plans": [{"name": "x", "limits": [{"name": "a", "max": 1, "window": "1s"}]}]}`,
		"bad cost":   `{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 1, "window": "1s"}], "cost": {"radius_unit_m": 0}}]}`,
	} {
		if _, err := Load(write(t, body)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

// A plans file that is JSON but not a valid set of plans is an error that
// names what is wrong.
func TestParseNamesTheFault(t *testing.T) {
	const limits = `"limits": [{"name": "a", "max": 10, "window": "1s"}]`
	for _, tc := range []struct{ body, want string }{
		{`{"plans": [`, "unexpected EOF"},
		{`[]`, "cannot unmarshal array"},
		{`{}`, "no plans"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `}]} {}`, "data after the plans object"},
		{`{"plans": [{"name": "x", "max_radius": 1, ` + limits + `}]}`, `unknown field "max_radius"`},
		{`{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 10, "windw": "1s"}]}]}`, `unknown field "windw"`},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `, "cost": {"hit_divisr": 4}}]}`, `unknown field "hit_divisr"`},
		{`{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 1.5, "window": "1s"}]}]}`, "max"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `}, {"name": "x", "max_radius_m": 2, ` + limits + `}]}`, `plan "x" is defined twice`},
		{`{"plans": [{"max_radius_m": 1, ` + limits + `}]}`, "a plan has no name"},
		{`{"plans": [null]}`, "a plan has no name"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 1, "window": "soon"}]}]}`, `plan "x": limit "a": window`},
		{`{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 1, "window": "1500us"}]}]}`, "whole number of milliseconds"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a", "max": 0, "window": "1s"}]}]}`, `limit "a": max 0`},
		{`{"plans": [{"name": "x", "max_radius_m": 1, "limits": [{"name": "a b", "max": 1, "window": "1s"}]}]}`, `limit "a b": name must be`},
		{`{"plans": [{"name": "x", "max_radius_m": 1, "limits": []}]}`, `plan "x" has no limits`},
		{`{"plans": [{"name": "x", "max_radius_m": -5, ` + limits + `}]}`, "max_radius_m must be positive"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `, "cost": {"radius_unit_m": 0}}]}`, "radius_unit_m"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `, "cost": {"radius_unit_m": 1, "hit_divisor": 0, "flat": 1}}]}`, "hit_divisor"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `, "cost": {"radius_unit_m": 1, "hit_divisor": 1, "flat": 1, "tiles": {"places": {"ref_zoom": 31, "max": 1}}}}]}`, `tiles "places"`},
		// Prices the quota could not charge: a search of 100 km at a unit
		// of 1 mm, a tile cap and a flat price above quota.MaxUnits.
		{`{"plans": [{"name": "x", "max_radius_m": 100000, ` + limits + `, "cost": {"radius_unit_m": 0.001, "hit_divisor": 1, "flat": 1}}]}`, "costs more than 1099511627776 units"},
		{`{"plans": [{"name": "x", "max_radius_m": 1e308, ` + limits + `}]}`, "costs more than"},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `, "cost": {"radius_unit_m": 1, "hit_divisor": 1, "flat": 1, "tiles": {"places": {"ref_zoom": 30, "max": 2199023255552}}}}]}`, `tiles "places": max 2199023255552`},
		{`{"plans": [{"name": "x", "max_radius_m": 1, ` + limits + `, "cost": {"radius_unit_m": 1, "hit_divisor": 1, "flat": 2199023255552}}]}`, "flat 2199023255552"},
		// The anonymous plan keeps nothing an identity past its windows.
		{`{"plans": [{"name": "anonymous", "max_radius_m": 1, "limits": [{"name": "a", "max": 10, "window": "1s"}, {"name": "month", "max": 100, "period": "month"}]}]}`,
			`plan "anonymous": limit "month" counts by the month: the anonymous plan takes sliding windows only`},
		{`{"plans": [{"name": "anonymous", "max_radius_m": 1, "limits": [{"name": "a", "max": 10, "window": "1s"}, {"name": "d", "max": 100, "period": "day"}]}]}`,
			`plan "anonymous": limit "d" counts by the day`},
	} {
		_, err := Parse([]byte(tc.body))
		if err == nil || !strings.HasPrefix(err.Error(), "plans: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error saying %q", tc.body, err, tc.want)
		}
	}
}

// FuzzParse: any bytes give an error or a set of plans that can all be
// enforced and that price every request the server can take at one unit
// or more and at most quota.MaxUnits; never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"plans": [{"name": "free", "max_radius_m": 1000, "limits": [{"name": "second", "max": 5, "window": "1s"}]}]}`))
	f.Add([]byte(`{"plans": [{"name": "x", "max_radius_m": 500, "limits": [{"name": "a", "max": 5, "window": "10s"}, {"name": "b", "max": 50, "window": "1h"}],
		"cost": {"radius_unit_m": 100, "hit_divisor": 2, "flat": 1, "tiles": {"places": {"ref_zoom": 30, "max": 1099511627776}}}}]}`))
	f.Add([]byte(`{"plans": [{"name": "x", "max_radius_m": 1e-300, "limits": [{"name": "a", "max": 1099511627776, "window": "2562047h"}], "cost": {"radius_unit_m": 1e-300, "hit_divisor": 9223372036854775807, "flat": 1}}]}`))
	f.Add([]byte(`{"plans": [{"name": "anonymous", "max_radius_m": 1, "limits": [{"name": "a", "max": 1, "window": "-1s"}]}]}`))
	f.Add([]byte(`{"plans": [{"name": "x", "max_radius_m": 10000, "limits": [{"name": "a", "max": 5, "window": "1m"}], "cost": {"radius_unit_m": 0.01, "hit_divisor": 4, "flat": 1}}]}`))
	f.Add([]byte(`{"plans": [null, {}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "plans: ") {
				t.Fatalf("Parse(%q): error %q has no package prefix", b, err)
			}
			return
		}
		for _, p := range s.All() {
			if err := p.Quota.Validate(); err != nil || p.Name != p.Quota.Name || !(p.MaxRadius > 0) {
				t.Fatalf("Parse(%q) accepted plan %+v: %v", b, p, err)
			}
			prices := []int64{p.Cost.Flat, p.Cost.Radius(p.MaxRadius), p.Cost.Radius(p.MaxRadius / 3)}
			for layer := range p.Cost.Tiles {
				for z := range 31 {
					prices = append(prices, p.Cost.Tile(layer, z), p.Cost.CachedTile(layer, z))
				}
			}
			for _, c := range prices {
				if c < 1 || c > quota.MaxUnits {
					t.Fatalf("Parse(%q) accepted plan %q, which prices a request at %d units", b, p.Name, c)
				}
			}
		}
	})
}
