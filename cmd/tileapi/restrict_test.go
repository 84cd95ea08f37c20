package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// TestKeysRestrict: `tileapi keys restrict` stores restrictions checked as
// the admin API checks them, names the flag at fault, and -clear removes
// them.
func TestKeysRestrict(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}
	keysRun := func(args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"tileapi", "keys"}, args...), getenv, &stdout, &stderr)
		return stdout.String(), err
	}
	out, err := keysRun("create", "-plan", "free")
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`created (?:secret |publishable )?key (\d+)`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no key id in %q", out)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	stored := func() string {
		t.Helper()
		ks, err := keys.NewPostgres(pool).List(ctx)
		if err != nil || len(ks) != 1 {
			t.Fatalf("keys: %v, %v", ks, err)
		}
		r, err := access.Parse(ks[0].Restrictions) // jsonb keeps its own order
		if err != nil {
			t.Fatal(err)
		}
		return string(r.JSON())
	}

	out, err = keysRun("restrict", id[1], "-origins", "https://app.example.com, https://*.example.org", "-allow-no-origin",
		"-networks", "203.0.113.0/24,2001:db8::/32", "-routes", "tiles,tilejson", "-layers", "places", "-sets", "boundaries")
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"origins":["https://app.example.com","https://*.example.org"],"allow_no_origin":true,"networks":["203.0.113.0/24","2001:db8::/32"],"routes":["tiles","tilejson"],"layers":["places"],"sets":["boundaries"]}`
	if got := stored(); got != want {
		t.Errorf("stored %s, want %s", got, want)
	}
	if !strings.Contains(out, "restricted to") {
		t.Errorf("stdout %q", out)
	}

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-origins", "https://a.example,https://*.com"}, `-origins: "https://*.com"`},
		{[]string{"-origins", "https://a.example/maps"}, "-origins: "},
		{[]string{"-networks", "10.0.0.0/8,somewhere"}, `-networks: "somewhere"`},
		{[]string{"-routes", "tile"}, `-routes: "tile": want one of tiles,`},
		{[]string{"-allow-no-origin"}, "-allow-no-origin: "},
		{[]string{"-clear", "-routes", "tiles"}, "-clear goes alone"},
		{nil, "no restriction"},
	} {
		_, err := keysRun(append([]string{"restrict", id[1]}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("restrict %q: %v, want an error with %q", tc.args, err, tc.err)
		}
	}
	if got := stored(); got != want {
		t.Errorf("after refused changes, stored %s", got)
	}
	if _, err := keysRun("restrict", "999999", "-routes", "tiles"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("restrict a key that does not exist: %v", err)
	}
	if out, err := keysRun("restrict", id[1], "-clear"); err != nil || !strings.Contains(out, "no restrictions") {
		t.Fatalf("restrict -clear: %q, %v", out, err)
	}
	if got := stored(); got != "" {
		t.Errorf("after -clear, stored %s", got)
	}
}

// TILEAPI_CORS_ORIGINS=keys asks for CORS from the origins keys allow,
// and goes alone.
func TestParseOriginsKeys(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{" keys ", "[keys]", ""},
		{"https://a.example,keys", "", "keys goes alone"},
		{"*", "[*]", ""},
		{"none", "[]", ""},
	} {
		got, err := parseOrigins(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseOrigins(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("parseOrigins(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
