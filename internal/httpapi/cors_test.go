package httpapi

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// A page on another origin may call /v1 with a key and read the quota
// headers; /admin never answers CORS; a list of origins admits only those.
func TestCORS(t *testing.T) {
	const tile = "/v1/tiles/places/3/4/2.mvt"
	e := newEnv(t)
	resp := e.do(t, http.MethodOptions, tile, nil,
		"Origin", "https://maps.example", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-api-key")
	if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-api-key") {
		t.Errorf("preflight: %d, headers %v", resp.StatusCode, resp.Header)
	}
	resp = e.get(t, tile, "Origin", "https://maps.example", "X-API-Key", "key-pro")
	exposed := strings.Split(resp.Header.Get("Access-Control-Expose-Headers"), ", ")
	for _, h := range []string{"Ratelimit", "Ratelimit-Policy", "Retry-After", "Etag", "X-Tile-Cache", "X-Ratelimit-Remaining"} {
		if !slices.Contains(exposed, h) {
			t.Errorf("%s is not exposed: %q", h, exposed)
		}
	}
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET from another origin: %d, Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp = e.do(t, http.MethodOptions, "/admin/keys", nil,
		"Origin", "https://maps.example", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "authorization")
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("/admin answers a preflight with Allow-Origin %q", got)
	}

	listed := newEnv(t, with(func(c *Config) { c.AllowedOrigins = []string{"https://maps.example"} }))
	if got := listed.get(t, tile, "Origin", "https://maps.example", "X-API-Key", "key-pro").Header.Get("Access-Control-Allow-Origin"); got != "https://maps.example" {
		t.Errorf("a listed origin: Allow-Origin %q", got)
	}
	if got := listed.get(t, tile, "Origin", "https://evil.example", "X-API-Key", "key-pro").Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("an origin not listed: Allow-Origin %q", got)
	}
}

// HEAD answers every GET route with its headers and no body, and is
// charged as the GET it stands for.
func TestHead(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{contains, "/v1/tiles/places/3/4/2.mvt", "/v1/tiles", "/v1/tiles/places.json", "/v1/quota", "/healthz", "/openapi.json"} {
		resp := e.do(t, http.MethodHead, path, nil, key("std")...)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes", path, resp.StatusCode, len(body))
		}
	}
	if u := e.used(t, key("std")...); u[0] != 1+16+1+1 {
		t.Errorf("used %v after HEAD of contains, a tile, the catalog and TileJSON: want 19 units (1+16+1+1)", u)
	}
}
