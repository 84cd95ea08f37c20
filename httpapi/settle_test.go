package httpapi

import (
	"net/http"
	"slices"
	"testing"
)

// A plan that prices work charges a request its price up front, then
// settles it down to the work measured (here one unit a feature returned),
// and says both in the headers; a plan that does not keeps the price.
func TestSettleOnWork(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, mode.opts(t)...)
			resp := e.get(t, "/v1/geofence/within?lng=2.35&lat=48.85&radius=20000&limit=3", key("work")...)
			var fc struct{ Features []any }
			decode(t, resp, http.StatusOK, &fc)
			if len(fc.Features) != 3 {
				t.Fatalf("%d features, want 3 around Paris", len(fc.Features))
			}
			if c, s := resp.Header.Get("X-RateLimit-Cost"), resp.Header.Get(headerSettledCost); c != "100" || s != "3" {
				t.Errorf("charged %q, settled %q; want 100 up front, settled to 3", c, s)
			}
			if rl := resp.Header.Get("RateLimit"); rl != `"minute";r=997;t=60` {
				t.Errorf("RateLimit %q, want the settled use", rl)
			}
			if u := e.used(t, key("work")...); !slices.Equal(u, []int64{3}) {
				t.Errorf("used %v after settling, want [3]", u)
			}

			// An empty answer still costs a unit.
			resp = e.get(t, "/v1/geofence/within?lng=-140&lat=-50&radius=20000", key("work")...)
			if s := resp.Header.Get(headerSettledCost); s != "1" {
				t.Errorf("settled %q for no features, want 1", s)
			}
			// A plan without a work model: no settling.
			resp = e.get(t, "/v1/geofence/within?lng=2.35&lat=48.85&radius=20000&limit=3", key("std")...)
			if s := resp.Header.Get(headerSettledCost); s != "" {
				t.Errorf("plan std settled to %q", s)
			}
		})
	}
}
