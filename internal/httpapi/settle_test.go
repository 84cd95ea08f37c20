package httpapi

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
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

// An empty tile costs one unit at any zoom: rendered, it is charged its
// price up front and settled down to one; cached, it is priced one up
// front. A tile with anything in it keeps its price.
func TestEmptyTile(t *testing.T) {
	eachMode(t, func(t *testing.T, opts ...option) {
		e := newEnv(t, opts...)
		const empty = "/v1/tiles/counties/5/16/10.mvt" // Central Europe: no county
		for _, tc := range []struct {
			path, cache, cost, settled string
			size                       func(int) bool
		}{
			{empty, "MISS", "16", "1", func(n int) bool { return n == 0 }},
			{empty, "HIT", "1", "", func(n int) bool { return n == 0 }},
			{"/v1/tiles/counties/5/7/12.mvt", "MISS", "16", "", func(n int) bool { return n > 0 }}, // Kansas
		} {
			resp := e.get(t, tc.path, key("std")...)
			body, _ := io.ReadAll(resp.Body)
			e.cacheWritten(t)
			h := resp.Header
			if resp.StatusCode != http.StatusOK || h.Get("X-Tile-Cache") != tc.cache || h.Get("X-RateLimit-Cost") != tc.cost || h.Get(headerSettledCost) != tc.settled || !tc.size(len(body)) {
				t.Errorf("%s: status %d, %s, cost %q settled %q, %d bytes; want 200, %s, cost %q settled %q",
					tc.path, resp.StatusCode, h.Get("X-Tile-Cache"), h.Get("X-RateLimit-Cost"), h.Get(headerSettledCost), len(body), tc.cache, tc.cost, tc.settled)
			}
		}
		// A hit's charge is lowered off the client's path with the quota in
		// Redis: wait for it.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			u := e.used(t, key("std")...)
			if slices.Equal(u, []int64{18, 18}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("used %v, want [18 18]: 1 and 1 for the empty tile, 16 for the full one", u)
			}
		}
	})
}
