package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// TestKeys runs `tileapi keys` step by step against one database schema.
func TestKeys(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	plansFile := filepath.Join(t.TempDir(), "plans.json")
	err := os.WriteFile(plansFile, []byte(`{"plans": [{"name": "team", "max_radius_m": 30000,
		"limits": [{"name": "minute", "max": 3000, "window": "1m"}]}]}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	env := func(vars ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(vars); i += 2 {
				if vars[i] == k {
					return vars[i+1]
				}
			}
			return ""
		}
	}
	withDB := env("DATABASE_URL", dbURL)
	keysRun := func(t *testing.T, getenv func(string) string, args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"tileapi", "keys"}, args...), getenv, &stdout, &stderr)
		return stdout.String(), err
	}

	// Two keys, the first named and the second with its flags after the
	// database URL.
	var secrets []string
	for _, args := range [][]string{
		{"create", "--plan", "free", "--name", "ci"},
		{"create", "-database-url", dbURL, "-plan", "pro"},
	} {
		out, err := keysRun(t, withDB, args...)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		secret := lines[len(lines)-1]
		if !regexp.MustCompile(`^`+keys.Pattern+`$`).MatchString(secret) || !keys.Plausible(secret) || !keys.Declares(secret, keys.Secret) {
			t.Fatalf("keys %q: the last line of stdout %q is not a secret", args, out)
		}
		if n := strings.Count(out, secret[len("tk_sec_3f9a2c1b_"):]); n != 1 {
			t.Errorf("keys %q: stdout shows the secret %d times, want once:\n%s", args, n, out)
		}
		if want := "(" + keys.PrefixOf(secret) + ")"; !strings.Contains(out, want) {
			t.Errorf("keys %q: stdout %q does not name the prefix %s", args, out, want)
		}
		secrets = append(secrets, secret)
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// lookup returns the key that secrets[i] resolves to in the database.
	lookup := func(t *testing.T, i int) keys.Key {
		t.Helper()
		k, err := keys.NewPostgres(pool).Lookup(ctx, keys.Hash(secrets[i]))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if k := lookup(t, 0); k.ID != 1 || k.Name != "ci" || k.Plan != "free" || k.Revoked() {
		t.Errorf("the first key is %+v", k)
	}
	if k := lookup(t, 1); k.ID != 2 || k.Name != "" || k.Plan != "pro" {
		t.Errorf("the second key is %+v", k)
	}

	for _, tc := range []struct {
		name   string
		getenv func(string) string
		args   []string
		out    string // a regular expression stdout must match
		err    string // what the error must contain, "" for none
	}{
		{"list", withDB, []string{"list"}, `^ID +PREFIX +KIND +NAME +PLAN +CUSTOMER +OVERRIDES +RESTRICTIONS +CREATED +EXPIRES +REVOKED\n` +
			`1 +` + keys.PrefixOf(secrets[0]) + ` +secret +ci +free +- +- +- +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +- +-\n` +
			`2 +` + keys.PrefixOf(secrets[1]) + ` +secret +- +pro +- +- +- +\S+ +- +-\n$`, ""},
		{"show", withDB, []string{"show", "2"}, `^id: +2\nprefix: +` + keys.PrefixOf(secrets[1]) + `\nkind: +secret\nname: +-\nplan: +pro\ncustomer: +-\n` +
			`overrides: +-\nrestrictions: +-\ncreated: +\d{4}-\d\d-\d\dT\S+Z\nexpires: +-\nrevoked: +-\n$`, ""},
		{"show an unknown id", withDB, []string{"show", "99"}, "", "keys: key not found: id 99"},
		{"revoke", withDB, []string{"revoke", "1"}, `^key 1 \(tk_sec_[0-9a-f]{8}\) revoked at \S+Z\n$`, ""},
		{"revoke again", withDB, []string{"revoke", "1"}, `^key 1 \(tk_sec_[0-9a-f]{8}\) revoked at \S+Z\n$`, ""},
		{"list a revoked key", withDB, []string{"list"}, `\n1 +tk_\S+ +secret +ci +free +- +- +- +\S+Z +- +\S+Z\n2 `, ""},
		{"set-plan", withDB, []string{"set-plan", "2", "free"}, `^key 2 \(tk_sec_[0-9a-f]{8}\) is on plan free\n$`, ""},
		{"set-plan to a plan of a file", withDB, []string{"set-plan", "2", "team", "-plans-file", plansFile}, `is on plan team\n$`, ""},
		{"plans file from the environment", env("DATABASE_URL", dbURL, "TILEAPI_PLANS_FILE", plansFile),
			[]string{"create", "-plan", "team"}, `on plan team\n`, ""},
		{"set-plan to an unknown plan", withDB, []string{"set-plan", "2", "team"}, "", `"team" is not a configured plan; a key may be on free, pro`},
		{"create on an unknown plan", withDB, []string{"create", "-plan", "gold"}, "", `"gold" is not a configured plan; a key may be on free, pro`},
		{"create without a plan", withDB, []string{"create"}, "", `"" is not a configured plan; a key may be on free, pro`},
		{"create on the anonymous plan", withDB, []string{"create", "-plan", "anonymous"}, "", `"anonymous" is the plan of requests without a key`},
		{"a missing plans file", withDB, []string{"create", "-plan", "free", "-plans-file", plansFile + ".missing"}, "", "no such file"},
		{"revoke an unknown id", withDB, []string{"revoke", "99"}, "", "keys: key not found: id 99"},
		{"set-plan of an unknown id", withDB, []string{"set-plan", "99", "pro"}, "", "keys: key not found: id 99"},
		{"an id that is not a number", withDB, []string{"revoke", "tk_3f9a2c1b"}, "", `keys revoke: id "tk_3f9a2c1b" is not a number`},
		{"too few arguments", withDB, []string{"set-plan", "2"}, "", "want 2 arguments"},
		{"override", withDB, []string{"override", "1", "burst=500/5s", "slow=20000/1m", "-max-in-flight", "3"},
			`^key 1 \(tk_sec_[0-9a-f]{8}\): plan free with overrides \{"limits": \[\{"max": 500, "name": "burst", "window": "5s"\}, \{"max": 20000, "name": "slow", "window": "1m"\}\], "max_in_flight": 3\}\n$`, ""},
		{"override longer than the history", withDB, []string{"override", "1", "day=20000/24h"}, "", "longer than the plans' history of 1m0s"},
		{"override with a bad limit", withDB, []string{"override", "1", "burst=0/5s"}, "", "invalid limits[0].max"},
		{"override not NAME=MAX/WINDOW", withDB, []string{"override", "1", "burst:500"}, "", `limit "burst:500" is not NAME=MAX/WINDOW`},
		{"override nothing", withDB, []string{"override", "1"}, "", "say what to override, or -clear"},
		{"override overage", withDB, []string{"override", "1", "-overage", "month"},
			`^key 1 \(tk_sec_[0-9a-f]{8}\): plan free with overrides \{"overage": \["month"\]\}\n$`, ""},
		{"override a month", withDB, []string{"override", "1", "month=50/month", "-overage", "month"},
			`with overrides \{"limits": \[\{"max": 50, "name": "month", "period": "month"\}\], "overage": \["month"\]\}\n$`, ""},
		{"override alerts", withDB, []string{"override", "1", "-alerts", "month=50,90%"}, `with overrides \{"alerts": \{"month": \[50, 90\]\}\}\n$`, ""},
		{"override alerts off", withDB, []string{"override", "1", "-alerts", "month="}, `with overrides \{"alerts": \{"month": \[\]\}\}\n$`, ""},
		{"override alerts of a window", withDB, []string{"override", "1", "-alerts", "burst=50"}, "", `alerts "burst": limit "burst" is a sliding window`},
		{"override alerts not percents", withDB, []string{"override", "1", "-alerts", "month=half"}, "", `alerts of month: "half" is not a whole percent`},
		{"override alerts above 100", withDB, []string{"override", "1", "-alerts", "month=150"}, "", `150 is not a percent from 1 to 100`},
		{"override alerts not LIMIT=P", withDB, []string{"override", "1", "-alerts", "80"}, "", `alerts "80" is not LIMIT=P,P,...`},
		{"override no overage", withDB, []string{"override", "1", "-no-overage"}, `with overrides \{"overage": \[\]\}\n$`, ""},
		{"override overage of a window", withDB, []string{"override", "1", "-overage", "burst"}, "", `invalid overage: overage "burst": limit "burst" is a sliding window`},
		{"override overage both ways", withDB, []string{"override", "1", "-overage", "month", "-no-overage"}, "", "say one"},
		{"override clear", withDB, []string{"override", "1", "-clear"}, `^key 1 \(tk_sec_[0-9a-f]{8}\) has no overrides: plan free alone\n$`, ""},
		{"override an unknown id", withDB, []string{"override", "99", "-max-in-flight", "1"}, "", "keys: key not found: id 99"},
		{"no database", env(), []string{"list"}, "", "no database: set DATABASE_URL or -database-url"},
		{"no action", withDB, nil, "", "usage: tileapi keys create"},
		{"unknown action", withDB, []string{"delete", "1"}, "", `unknown keys command "delete"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := keysRun(t, tc.getenv, tc.args...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(tc.out).MatchString(out) {
				t.Errorf("stdout %q, want a match for %s", out, tc.out)
			}
			for _, secret := range secrets {
				if strings.Contains(out, secret[len("tk_sec_3f9a2c1b_"):]) {
					t.Errorf("stdout %q shows the secret %s", out, secret)
				}
			}
		})
	}

	if k := lookup(t, 0); !k.Revoked() {
		t.Errorf("the first key, revoked, is %+v", k)
	}
	if k := lookup(t, 1); k.Plan != "team" || k.Revoked() {
		t.Errorf("the second key, moved to team, is %+v", k)
	}
}
