package httpapi

import (
	"context"
	"strings"
	"testing"
)

// The statuses of the usage history: /v1/usage and /admin/usage, as JSON
// and CSV.
func contractUsage(t *testing.T, c *contract, backend []option) {
	e := newEnv(t, append(backend, with(func(c *Config) { c.UnknownKeys = 1 }))...)
	for _, path := range []string{contains, "/v1/tiles/places/3/1/3.mvt", "/v1/geofence/within?lng=2.35&lat=48.85&radius=30000"} {
		e.get(t, path, key("std")...).Body.Close() // something to read: a 200 and a 422
	}
	ctx := context.Background()
	k, err := e.keys.Lookup(ctx, hashOf("key-ten"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.SetRestrictions(ctx, k.ID, []byte(`{"routes":["within"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	csv := func(x exchange) exchange {
		x.headers = append(x.headers, "Accept", "text/csv")
		return x
	}
	// The one unknown key allowed, by GET alone: the index remembers it
	// unknown for its refresh interval (50 ms here), and a HEAD after that,
	// on a slow machine, would be a second unknown key, 429.
	c.check(t, e, get("/v1/usage", 401).key("made-up"))
	for _, x := range []exchange{
		get("/v1/usage", 200).key("std"),
		get("/v1/usage?by=day&group=layer", 200).key("std"),
		get("/v1/usage?from=2026-03-10T00:00:00Z&to=2026-03-11T00:00:00Z&group=route", 200).key("std"),
		csv(get("/v1/usage?group=layer", 200).key("std")),
		{method: "GET", path: "/v1/usage?by=week", status: 400, refused: true, headers: key("std")},
		{method: "GET", path: "/v1/usage?from=yesterday", status: 400, refused: true, headers: key("std")},
		get("/v1/usage?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z", 400).key("std"), // over 31 days by hour
		get("/v1/usage", 401),                      // no key: none to read
		get("/v1/usage", 403).key("ten"),           // route-not-allowed
		get("/v1/usage", 429).key("made-up-again"), // too-many-unknown-keys (made-up spent the one allowed)
		adminCall("GET", "/admin/usage", "", 200),
		adminCall("GET", "/admin/usage?by=day&group=route&key=1", "", 200),
		csv(adminCall("GET", "/admin/usage?customer=1", "", 200)),
		{admin: true, method: "GET", path: "/admin/usage?key=abc", headers: adminAuth, status: 400, refused: true},
		{admin: true, method: "GET", path: "/admin/usage?group=plan", headers: adminAuth, status: 400, refused: true},
		adminCall("GET", "/admin/usage?from=2026-03-11T00:00:00Z&to=2026-03-10T00:00:00Z", "", 400), // to before from
	} {
		c.both(t, e, x)
	}
	guarded := newEnv(t, backend...)
	c.both(t, guarded, exchange{admin: true, method: "GET", path: "/admin/usage", status: 401})
	for range adminFailures - 1 {
		send(t, guarded.admin, "GET", "/admin/usage", strings.NewReader(""), "Authorization", "Bearer wrong")
	}
	c.both(t, guarded, adminCall("GET", "/admin/usage", "", 429))
}
