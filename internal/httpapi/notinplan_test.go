package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/plans"
)

// A plan sells the layers and geofence sets its prices name (or "*"
// covers): a request for any other is a 403 not-in-plan, charged nothing,
// on every quota store.
func TestNotInPlan(t *testing.T) {
	ps, err := plans.Parse([]byte(`{"plans": [{"name": "places-only", "max_radius_m": 20000,
		"limits": [{"name": "minute", "max": 1000, "window": "1m"}],
		"cost": {"radius_unit_m": 2000, "hit_divisor": 4, "flat": 1,
		         "tiles": {"places": {"ref_zoom": 10, "max": 16}}, "sets": {"places": {"radius_unit_m": 1000}}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, append(mode.opts(t), with(func(c *Config) { c.Plans = ps }))...)
			if _, err := e.keys.Add(t.Context(), "places-only", "places-only", "key-places-only"); err != nil {
				t.Fatal(err)
			}
			k := key("places-only")
			for _, path := range []string{
				"/v1/tiles/countries/0/0/0.mvt",
				"/v1/tiles/counties/5/8/12.mvt",
				"/v1/geofence/contains?lng=2.35&lat=48.85",
				"/v1/geofence/boundaries/contains?lng=2.35&lat=48.85",
			} {
				resp := e.get(t, path, k...)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"code":"not-in-plan"`) ||
					!strings.Contains(string(body), `plan \"places-only\" does not include`) {
					t.Errorf("%s: %d %s", path, resp.StatusCode, body)
				}
			}
			// Nothing was charged: the next request sees the whole minute
			// but its own cost (a search of 2 km at the set's 1 km: 4 units).
			resp := e.get(t, "/v1/geofence/within?lng=2.35&lat=48.85&radius=2000", k...)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Cost") != "4" || resp.Header.Get("X-RateLimit-Remaining") != "996" {
				t.Errorf("within: %d, cost %s, remaining %s; want 200, 4, 996", resp.StatusCode,
					resp.Header.Get("X-RateLimit-Cost"), resp.Header.Get("X-RateLimit-Remaining"))
			}
			resp = e.get(t, "/v1/tiles/places/10/511/340.mvt", k...)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("a places tile: %d", resp.StatusCode)
			}
		})
	}
}
