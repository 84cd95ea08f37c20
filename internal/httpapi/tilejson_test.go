package httpapi

import (
	"slices"
	"testing"
)

// TileJSON's tiles are absolute URLs (TileJSON 3.0.0 section 3.2): from
// TILEAPI_PUBLIC_URL, cacheable by shared caches; without it, from the
// request's Host, checked, for the client's cache alone and varying by
// Host, so that a cache in front cannot be poisoned with another host's
// URLs. A Host that is no host is a 400 naming it, uncharged.
func TestTileJSONURLs(t *testing.T) {
	type tileJSON struct{ Tiles []string }
	for _, tc := range []struct {
		name, publicURL, host string
		status                int
		tile, cache, vary     string
	}{
		{"public URL", "https://tiles.example.com", "evil.example:80", 200,
			"https://tiles.example.com/v1/tiles/places/{z}/{x}/{y}.mvt", "public, max-age=300", ""},
		{"from Host", "", "maps.example.org:8443", 200,
			"http://maps.example.org:8443/v1/tiles/places/{z}/{x}/{y}.mvt", "private, max-age=300", "Host"},
		{"from an IPv6 Host", "", "[::1]:8080", 200,
			"http://[::1]:8080/v1/tiles/places/{z}/{x}/{y}.mvt", "private, max-age=300", "Host"},
		{"a Host that is no host", "", "a_b.example", 400, "", "no-store", ""},
		{"a port that is no port", "", "example.org:0", 400, "", "no-store", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, with(func(c *Config) { c.PublicURL = tc.publicURL }))
			resp := e.get(t, "/v1/tiles/places.json", append(key("std"), "Host", tc.host)...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if got := resp.Header.Values("Vary"); slices.Contains(got, "Host") != (tc.vary == "Host") {
				t.Errorf("Vary %q, want Host in it: %v", got, tc.vary == "Host")
			}
			if tc.status != 200 {
				var p problem
				decode(t, resp, tc.status, &p)
				if p.Field != "Host" {
					t.Errorf("problem %+v, want one naming Host", p)
				}
				if u := e.used(t, key("std")...); u[0] != 0 {
					t.Errorf("a refused Host was charged: used %v", u)
				}
				return
			}
			var tj tileJSON
			decode(t, resp, 200, &tj)
			if len(tj.Tiles) != 1 || tj.Tiles[0] != tc.tile {
				t.Errorf("tiles %q, want %q", tj.Tiles, tc.tile)
			}
		})
	}
}
