package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/tiles"
)

func TestPlansCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(file, []byte(`{"plans": [{"name": "tiny", "max_radius_m": 3000,
		"limits": [{"name": "w", "max": 5, "window": "10s"}, {"name": "d", "max": 50, "period": "day"}],
		"alerts": {"d": [50, 90]}, "overage": ["d"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	getenv := func(k string) string {
		if k == "TILEAPI_PLANS_FILE" {
			return file
		}
		return ""
	}
	if err := run(context.Background(), []string{"tileapi", "plans"}, getenv, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^free +300 per 5s \(burst\), 1200 per 1m0s \(minute\), 100000 per month \(month\) +20000 m +34641 m +8 +month 80%, 100%$`,
		`(?m)^tiny +5 per 10s \(w\), 50 per day \(d, soft\) +3000 m +4472 m +no limit +d 50%, 90%$`,
		`(?m)^anonymous .* none$`,
		`(?m)^key plans without max_in_flight: a killed server's charges .* connection cap \(max_conns\): tiny$`,
		`(?m)^free +1 +1 +7 +25 +100 +625$`,
		`(?m)^pro places +16/4 +16/4 +16/4 +16/4 +16/4 +4/1 +1/1 +1/1 +1/1$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
}

// serve says at startup, in one log line, which key plans have no
// max_in_flight; of the compiled-in plans, which all have one, it says
// nothing (TestServeEmbedded).
func TestServeNoInFlightLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(file, []byte(`{"plans": [{"name": "tiny", "max_radius_m": 3000,
		"limits": [{"name": "w", "max": 5, "window": "10s"}, {"name": "d", "max": 50, "period": "day"}],
		"alerts": {"d": [50, 90]}, "overage": ["d"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in := startServe(t, map[string]string{"TILEAPI_PLANS_FILE": file})
	if n := strings.Count(in.stderr.String(), `"msg":"`+noInFlightLimit+`","plans":["tiny"]`); n != 1 {
		t.Errorf("the startup log says %d times that tiny has no in-flight limit, want once:\n%s", n, in.stderr)
	}
}

// A plans file that prices a layer the server does not have ("place" for
// "places") is refused, naming the layers, by every command that loads
// plans: it would otherwise cost the flat price.
func TestPlansUnknownLayer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(file, []byte(`{"plans": [{"name": "team", "max_radius_m": 3000,
		"limits": [{"name": "w", "max": 50, "window": "10s"}],
		"cost": {"radius_unit_m": 2000, "hit_divisor": 4, "flat": 1, "tiles": {"place": {"ref_zoom": 10, "max": 16}}}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return map[string]string{"TILEAPI_PLANS_FILE": file}[k] }
	for _, args := range [][]string{{"tileapi", "plans"}, {"tileapi", "serve", "-addr", "127.0.0.1:0"}} {
		err := run(context.Background(), args, getenv, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `layer "place", which does not exist; they are places, countries, counties`) {
			t.Errorf("%v: %v, want the unknown layer refused with the list", args[1:], err)
		}
	}
}

// The compiled-in plans price only layers that exist.
func TestDefaultPlansLayers(t *testing.T) {
	if err := plans.Defaults().CheckLayers(tiles.LayerNames(), []string{geofence.PlacesSet, geofence.BoundariesSet}); err != nil {
		t.Error(err)
	}
}

// With a layers file, tileapi plans prices its layers and sets too: by
// name, by "*", or not in the plan.
func TestPlansCommandLayersFile(t *testing.T) {
	dir := t.TempDir()
	plansFile, layersFile := filepath.Join(dir, "plans.json"), filepath.Join(dir, "layers.yaml")
	if err := os.WriteFile(plansFile, []byte(`{"plans": [{"name": "parcels-only", "max_radius_m": 3000,
		"limits": [{"name": "w", "max": 500, "window": "10s"}],
		"cost": {"radius_unit_m": 1000, "hit_divisor": 2, "flat": 2,
		         "tiles": {"parcels": {"ref_zoom": 14, "max": 64}},
		         "sets": {"stores": {"radius_unit_m": 500}}}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(layersFile, []byte("layers: [{name: parcels, table: parcels, minzoom: 8}]\ngeofences: [{name: stores, table: stores}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TILEAPI_PLANS_FILE": plansFile, "TILEAPI_LAYERS_FILE": layersFile}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"tileapi", "plans"}, func(k string) string { return env[k] }, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^free parcels +- +- +- +- +16/4 +16/4 +16/4 +1/1 +1/1$`, // "*" of the compiled-in plans
		`(?m)^parcels-only parcels +- +- +- +- +64/32 +64/32 +64/32 +16/8 +1/1$`,
		`(?m)^parcels-only places +not in plan *$`,
		`(?m)^parcels-only stores +4 +400 +2$`,
		`(?m)^parcels-only boundaries +not in plan *$`,
		`(?m)^free stores +1 +25 +1$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
}
