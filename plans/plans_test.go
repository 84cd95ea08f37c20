package plans

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
	if !ok || free.Quota.MaxCost() != 100 || free.MaxRadius != 20_000 {
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
