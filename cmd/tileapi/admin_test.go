package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// adminToken is a token long enough for serve.
const adminToken = "0123456789abcdef0123456789abcdef01234567"

// An admin token shorter than 32 characters is refused at startup with one
// line that names TILEAPI_ADMIN_TOKEN and does not show the token; 32 is
// enough, and none disables the admin API.
func TestAdminTokenLength(t *testing.T) {
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{"", true},
		{"!", false},
		{"change-me", false},
		{strings.Repeat("s", 31), false},
		{strings.Repeat("é", 31), false}, // characters, not bytes
		{strings.Repeat("s", 32), true},
	} {
		for name, getenv := range map[string]func(string) string{
			"env":  func(k string) string { return map[string]string{"TILEAPI_ADMIN_TOKEN": tc.token}[k] },
			"flag": func(string) string { return "" },
		} {
			args := []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", "none", "-plans-file", "/nonexistent"}
			if name == "flag" {
				args = append(args, "-admin-token", tc.token)
			}
			err := run(context.Background(), args, getenv, io.Discard, io.Discard)
			// -plans-file stops a valid configuration before it serves.
			refused := err != nil && strings.Contains(err.Error(), "TILEAPI_ADMIN_TOKEN")
			if refused == tc.ok {
				t.Errorf("%s: a token of %d characters: %v", name, len([]rune(tc.token)), err)
			}
			if refused && (strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), tc.token)) {
				t.Errorf("%s: the refusal is not one line without the token: %q", name, err)
			}
		}
	}
}

// The admin API is served on the admin listener, not the public one (404
// there) unless TILEAPI_ADMIN_ON_PUBLIC asks; the public /readyz says only
// whether the server is ready, the admin one says each check.
func TestServeAdminListener(t *testing.T) {
	get := func(url, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	in := startServe(t, map[string]string{"TILEAPI_ADMIN_TOKEN": adminToken, "REDIS_URL": "redis://127.0.0.1:1/0"})
	if status, body := get(in.url+"/admin/keys", adminToken); status != http.StatusNotFound || !strings.Contains(body, `"code":"not-found"`) {
		t.Errorf("public /admin/keys: %d %s, want a 404 problem", status, body)
	}
	if status, body := get(in.adminURL+"/admin/keys", adminToken); status != http.StatusOK || !strings.Contains(body, `"keys"`) {
		t.Errorf("admin /admin/keys: %d %s", status, body)
	}
	if status, body := get(in.url+"/readyz", ""); status != http.StatusOK || body != `{"ready":true}` {
		t.Errorf("public /readyz with Redis down under fail-open: %d %s, want 200 {\"ready\":true}", status, body)
	}
	if status, body := get(in.adminURL+"/readyz", ""); status != http.StatusOK || !strings.Contains(body, `"degraded":["redis"]`) || strings.Contains(body, `"redis":"ok"`) {
		t.Errorf("admin /readyz: %d %s, want Redis's error", status, body)
	}
	if strings.Contains(in.stderr.String(), adminToken) {
		t.Error("the log holds the admin token")
	}

	both := startServe(t, map[string]string{"TILEAPI_ADMIN_TOKEN": adminToken, "TILEAPI_ADMIN_ON_PUBLIC": "1"})
	if status, body := get(both.url+"/admin/keys", adminToken); status != http.StatusOK {
		t.Errorf("public /admin/keys with TILEAPI_ADMIN_ON_PUBLIC: %d %s", status, body)
	}
}

// An admin address that cannot be listened on stops serve, naming
// TILEAPI_ADMIN_ADDR, and the public listener with it.
func TestServeAdminAddrTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	err = run(context.Background(), []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", taken.Addr().String()},
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "TILEAPI_ADMIN_ADDR") {
		t.Errorf("serve with its admin address taken: %v", err)
	}
}

// Demo keys: any plan in memory; with a database, none unless
// TILEAPI_DEMO_KEYS_IN_DATABASE, and then only on a plan whose month limit
// is at most the compiled-in free plan's, whatever a plans file calls free.
func TestParseDemoKeys(t *testing.T) {
	ps, err := plans.Parse([]byte(`{"plans": [
		{"name": "free", "max_radius_m": 20000, "limits": [{"name": "minute", "max": 10000, "window": "1m"}, {"name": "month", "max": 5000000, "period": "month"}]},
		{"name": "trial", "max_radius_m": 20000, "limits": [{"name": "minute", "max": 10, "window": "1m"}, {"name": "month", "max": 1000, "period": "month"}]},
		{"name": "windowed", "max_radius_m": 20000, "limits": [{"name": "minute", "max": 10, "window": "1m"}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec                string
		inDatabase, allowed bool
		want                string // a piece of the error; empty: accepted
	}{
		{spec: embeddedDemoKeys},
		{spec: "demo-pro:pro, demo-free:free"},
		{spec: "demo-free:free", inDatabase: true, want: "TILEAPI_DEMO_KEYS_IN_DATABASE"},
		{spec: "demo-trial:trial", inDatabase: true, allowed: true},
		{spec: "demo-trial:trial,demo-pro:pro", inDatabase: true, allowed: true, want: `plan "pro" is not free-like`},
		{spec: "demo-free:free", inDatabase: true, allowed: true, want: `plan "free" is not free-like`},
		{spec: "demo-w:windowed", inDatabase: true, allowed: true, want: `plan "windowed" is not free-like`},
		{spec: "demo-x:gold", want: `unknown plan "gold"`},
		{spec: "demo-x", want: "is not key:plan"},
	} {
		demo, err := parseDemoKeys(ps, tc.spec, tc.inDatabase, tc.allowed)
		switch {
		case tc.want == "" && (err != nil || len(demo) != len(strings.Split(tc.spec, ","))):
			t.Errorf("%q (database %v, allowed %v): %v, %v", tc.spec, tc.inDatabase, tc.allowed, demo, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q (database %v, allowed %v): %v, want an error with %q", tc.spec, tc.inDatabase, tc.allowed, err, tc.want)
		}
	}
}

// With a database, serve refuses demo keys it was not told to write there,
// and a demo key on the pro plan even when told, writing none; told, it
// writes one on the free plan, which then works.
func TestServeDemoKeysInDatabase(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	getenv := func(k string) string { return env[k] }
	migrate(t, getenv)
	loadParis(t, getenv)
	serveArgs := []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", "none"}
	for _, tc := range []struct {
		keys, inDatabase, want string
	}{
		{"demo-free:free,demo-pro:pro", "", "TILEAPI_DEMO_KEYS_IN_DATABASE"},
		{"demo-free:free,demo-pro:pro", "1", `plan "pro" is not free-like`},
	} {
		env["TILEAPI_DEMO_KEYS"], env["TILEAPI_DEMO_KEYS_IN_DATABASE"] = tc.keys, tc.inDatabase
		// Bounded, should serve start after all.
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := run(sctx, serveArgs, getenv, io.Discard, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TILEAPI_DEMO_KEYS=%s TILEAPI_DEMO_KEYS_IN_DATABASE=%q: %v, want a refusal naming %s", tc.keys, tc.inDatabase, err, tc.want)
		}
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if ks, err := keys.NewPostgres(pool).List(ctx); err != nil || len(ks) != 0 {
		t.Fatalf("after the refusals the database holds %d keys (%v), want none", len(ks), err)
	}

	in := startServe(t, map[string]string{"DATABASE_URL": dbURL, "TILEAPI_DEMO_KEYS": "demo-free:free", "TILEAPI_DEMO_KEYS_IN_DATABASE": "1"})
	req, _ := http.NewRequest(http.MethodGet, in.url+"/v1/geofence/within?lng=2.35&lat=48.85&radius=1000", nil)
	req.Header.Set("X-API-Key", "demo-free")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the demo key written with TILEAPI_DEMO_KEYS_IN_DATABASE: status %d", resp.StatusCode)
	}
	if ks, err := keys.NewPostgres(pool).List(ctx); err != nil || len(ks) != 1 || ks[0].Plan != "free" {
		t.Errorf("the database holds %v (%v), want the one free demo key", ks, err)
	}
}
