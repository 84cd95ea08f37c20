package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	restrictedTile = "/v1/tiles/places/3/4/2.mvt"
	app            = "https://app.example.com"
)

// Each restriction of a key over HTTP: what it allows is served and
// charged, what it refuses is a 403 naming the restriction, and never
// charged (the key's usage grows by the allowed requests' costs alone).
func TestRestrictions(t *testing.T) {
	type req struct {
		path    string
		headers []string
		code    string // "" for a 200
	}
	cases := []struct {
		name, restrictions string
		proxied            bool // behind a trusted proxy at 127.0.0.1
		reqs               []req
	}{
		{"origins", `{"origins": ["https://app.example.com", "https://*.maps.example"]}`, false, []req{
			{restrictedTile, []string{"Origin", app}, ""},
			{restrictedTile, []string{"Origin", "https://APP.example.com:443"}, ""},
			{restrictedTile, []string{"Origin", "https://eu.maps.example"}, ""},
			{restrictedTile, []string{"Referer", app + "/map.html?z=3"}, ""},
			{restrictedTile, []string{"Origin", "https://evil.example"}, "origin-not-allowed"},
			{restrictedTile, []string{"Origin", "https://maps.example"}, "origin-not-allowed"},
			{restrictedTile, []string{"Origin", "https://evil.example", "Referer", app + "/"}, "origin-not-allowed"},
			{restrictedTile, nil, "origin-not-allowed"},
			{"/v1/quota", nil, "origin-not-allowed"},
		}},
		{"allow_no_origin", `{"origins": ["https://app.example.com"], "allow_no_origin": true}`, false, []req{
			{restrictedTile, nil, ""},
			{restrictedTile, []string{"Origin", "https://evil.example"}, "origin-not-allowed"},
		}},
		{"networks", `{"networks": ["127.0.0.0/8", "::1/128"]}`, false, []req{
			{restrictedTile, nil, ""},
			{contains, nil, ""},
		}},
		{"networks refused", `{"networks": ["10.0.0.0/8", "2001:db8::/32"]}`, false, []req{
			{restrictedTile, nil, "network-not-allowed"},
			{"/v1/quota", nil, "network-not-allowed"},
		}},
		{"networks behind a proxy", `{"networks": ["203.0.113.0/24"]}`, true, []req{
			{restrictedTile, []string{"X-Forwarded-For", "203.0.113.9"}, ""},
			{restrictedTile, []string{"X-Forwarded-For", "198.51.100.9"}, "network-not-allowed"},
			{restrictedTile, nil, "network-not-allowed"}, // the proxy's own
		}},
		{"routes", `{"routes": ["tiles", "contains"]}`, false, []req{
			{restrictedTile, nil, ""},
			{contains, nil, ""},
			{"/v1/tiles/places.json", nil, "route-not-allowed"},
			{"/v1/tiles", nil, "route-not-allowed"},
			{"/v1/geofence", nil, "route-not-allowed"},
			{"/v1/geofence/within?lng=2.35&lat=48.85&radius=1000", nil, "route-not-allowed"},
			{"/v1/quota", nil, "route-not-allowed"},
		}},
		{"routes catalog and sets", `{"routes": ["catalog", "sets", "tilejson", "quota"]}`, false, []req{
			{"/v1/tiles", nil, ""},
			{"/v1/geofence", nil, ""},
			{"/v1/tiles/places.json", nil, ""},
			{"/v1/quota", nil, ""},
			{restrictedTile, nil, "route-not-allowed"},
		}},
		{"layers", `{"layers": ["places"]}`, false, []req{
			{restrictedTile, nil, ""},
			{"/v1/tiles/places.json", nil, ""},
			{"/v1/tiles", nil, ""},
			{"/v1/tiles/countries/0/0/0.mvt", nil, "layer-not-allowed"},
			{"/v1/tiles/countries.json", nil, "layer-not-allowed"},
			{contains, nil, ""},
		}},
		{"sets", `{"sets": ["boundaries"]}`, false, []req{
			{contains, nil, ""},
			{"/v1/geofence/boundaries/contains?lng=2.35&lat=48.85", nil, ""},
			{"/v1/geofence/within?lng=2.35&lat=48.85&radius=1000", nil, "set-not-allowed"},
			{"/v1/geofence/places/within?lng=2.35&lat=48.85&radius=1000", nil, "set-not-allowed"},
			{restrictedTile, nil, ""},
		}},
	}
	fields := map[string]string{"origin-not-allowed": "origins", "network-not-allowed": "networks",
		"route-not-allowed": "routes", "layer-not-allowed": "layers", "set-not-allowed": "sets"}
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, append(mode.opts(t), with(func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32", "::1/128"} }))...)
			direct := newEnv(t, mode.opts(t)...)
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					env := direct
					if tc.proxied {
						env = e
					}
					secret := "key-restricted-" + strconv.Itoa(i)
					k, err := env.keys.Add(context.Background(), tc.name, "std", secret)
					if err != nil {
						t.Fatal(err)
					}
					withKey := []string{"X-API-Key", secret}
					admin := []string{"Authorization", "Bearer admin-secret"}
					path := "/admin/keys/" + itoa(k.ID) + "/restrictions"
					var got keyJSON
					decode(t, env.adminDo(t, http.MethodPut, path, strings.NewReader(tc.restrictions), admin...), http.StatusOK, &got)
					if len(got.Restrictions) == 0 {
						t.Fatalf("the key shows no restrictions: %+v", got)
					}
					var charged int64
					for _, q := range tc.reqs {
						resp := env.get(t, q.path, append(withKey, q.headers...)...)
						if q.code == "" {
							if resp.StatusCode != http.StatusOK {
								t.Errorf("%s %v: status %d, want 200", q.path, q.headers, resp.StatusCode)
							}
							if c := resp.Header.Get("X-RateLimit-Cost"); c != "" {
								n, _ := strconv.ParseInt(c, 10, 64)
								charged += n
							}
							continue
						}
						var p problem
						decode(t, resp, http.StatusForbidden, &p)
						if p.Code != q.code || p.Field != fields[q.code] || !strings.Contains(p.Detail, "not charged") {
							t.Errorf("%s %v: %s (field %q: %s), want %s", q.path, q.headers, p.Code, p.Field, p.Detail, q.code)
						}
						if h := resp.Header.Get("X-RateLimit-Remaining"); h != "" {
							t.Errorf("%s %v: refused with X-RateLimit-Remaining %s", q.path, q.headers, h)
						}
					}
					var cleared keyJSON
					decode(t, env.adminDo(t, http.MethodDelete, path, nil, admin...), http.StatusOK, &cleared)
					if cleared.Restrictions != nil {
						t.Errorf("restrictions after DELETE: %s", cleared.Restrictions)
					}
					// A cached tile's refund of its miss price may still be
					// on its way (the gate retries it in the background).
					for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
						u := env.used(t, withKey...)
						if u[1] == charged {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("used %v after the requests, want %d in the minute: the allowed ones' costs alone", u, charged)
						}
					}
				})
			}
		})
	}
}

// The admin route refuses bad restrictions with a 400 naming the field;
// restrictions stored by another server reach this one at its index's
// refresh; stored ones that do not parse refuse the key (never serve it
// unrestricted); anonymous callers have none.
func TestRestrictionsAdminAndStore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k, err := e.keys.Lookup(ctx, hashOf("key-std"))
	if err != nil {
		t.Fatal(err)
	}
	admin := []string{"Authorization", "Bearer admin-secret"}
	path := "/admin/keys/" + itoa(k.ID) + "/restrictions"
	for _, tc := range []struct{ body, field string }{
		{`{"origins": ["https://*.com"]}`, "origins[0]"},
		{`{"origins": ["https://a.example/path"]}`, "origins[0]"},
		{`{"networks": ["10.0.0.0/8", "nowhere"]}`, "networks[1]"},
		{`{"routes": ["tile"]}`, "routes[0]"},
		{`{"origin": []}`, "restrictions"},
		{`{}`, "restrictions"},
		{`not json`, "restrictions"},
	} {
		var p problem
		decode(t, e.adminDo(t, http.MethodPut, path, strings.NewReader(tc.body), admin...), http.StatusBadRequest, &p)
		if p.Field != tc.field {
			t.Errorf("%s: %+v, want field %q", tc.body, p, tc.field)
		}
	}
	var p problem
	decode(t, e.adminDo(t, http.MethodPut, "/admin/keys/999/restrictions", strings.NewReader(`{"routes": ["tiles"]}`), admin...), http.StatusNotFound, &p)

	if _, err := e.keys.SetRestrictions(ctx, k.ID, []byte(`{"routes": ["within"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	decode(t, e.get(t, contains, key("std")...), http.StatusForbidden, &p)
	if p.Code != "route-not-allowed" {
		t.Errorf("after another server's change: %+v", p)
	}

	if _, err := e.keys.SetRestrictions(ctx, k.ID, []byte(`{"origins": ["*"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{contains, "/v1/quota"} {
		decode(t, e.get(t, path, key("std")...), http.StatusForbidden, &p)
		if p.Code != "invalid-restrictions" {
			t.Errorf("%s with unreadable restrictions: %+v", path, p)
		}
	}
	decode(t, e.get(t, contains), http.StatusOK, nil) // anonymous
}

// In keys mode CORS admits a preflight from an origin some active key
// lists, and no other; the real request is still checked against its own
// key, and the page can read its 403.
func TestCORSKeysMode(t *testing.T) {
	e := newEnv(t, with(func(c *Config) { c.AllowedOrigins = []string{CORSKeys} }))
	ctx := context.Background()
	admin := []string{"Authorization", "Bearer admin-secret"}
	restrict := func(plan, body string) string {
		t.Helper()
		k, err := e.keys.Lookup(ctx, hashOf("key-"+plan))
		if err != nil {
			t.Fatal(err)
		}
		path := "/admin/keys/" + itoa(k.ID) + "/restrictions"
		decode(t, e.adminDo(t, http.MethodPut, path, strings.NewReader(body), admin...), http.StatusOK, nil)
		return path
	}
	preflight := func(origin string) string {
		t.Helper()
		return e.do(t, http.MethodOptions, restrictedTile, nil, "Origin", origin,
			"Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-api-key").Header.Get("Access-Control-Allow-Origin")
	}
	if got := preflight(app); got != "" {
		t.Errorf("no key lists an origin, yet a preflight is allowed: %q", got)
	}
	stdPath := restrict("std", `{"origins": ["https://app.example.com"]}`)
	restrict("pro", `{"origins": ["https://*.other.example"]}`)
	for origin, want := range map[string]string{app: app, "https://a.other.example": "https://a.other.example", "https://evil.example": ""} {
		if got := preflight(origin); got != want {
			t.Errorf("preflight from %s: Allow-Origin %q, want %q", origin, got, want)
		}
	}
	resp := e.get(t, restrictedTile, "Origin", "https://a.other.example", "X-API-Key", "key-std")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "https://a.other.example" {
		t.Errorf("key-std from pro's origin: %d, Allow-Origin %q; want 403 the page can read", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp := e.get(t, restrictedTile, "Origin", app, "X-API-Key", "key-std"); resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("key-std from its origin: %d, Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	decode(t, e.adminDo(t, http.MethodDelete, stdPath, nil, admin...), http.StatusOK, nil)
	if got := preflight(app); got != "" {
		t.Errorf("after the restrictions are cleared, a preflight from %s is allowed: %q", app, got)
	}
	five, _ := e.keys.Lookup(ctx, hashOf("key-five"))
	restrict("five", `{"origins": ["https://expired.example"]}`)
	if got := preflight("https://expired.example"); got != "https://expired.example" {
		t.Errorf("preflight from a key's origin: Allow-Origin %q", got)
	}
	if _, err := e.keys.SetExpiry(ctx, five.ID, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := preflight("https://expired.example"); got != "" {
		t.Errorf("after the key expired, a preflight from its origin is allowed: %q", got)
	}
	pro, _ := e.keys.Lookup(ctx, hashOf("key-pro"))
	decode(t, e.adminDo(t, http.MethodDelete, "/admin/keys/"+itoa(pro.ID), nil, admin...), http.StatusOK, nil)
	if got := preflight("https://a.other.example"); got != "" {
		t.Errorf("after the key is revoked, a preflight from its origin is allowed: %q", got)
	}
}
