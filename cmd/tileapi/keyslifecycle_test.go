package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// TestKeysLifecycle runs the commands of `tileapi keys` that make, expire
// and reroll keys and read and reset their usage, against one database
// schema and serve's Redis.
func TestKeysLifecycle(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	redisURL := testenv.RedisURL(t)
	prefix := fmt.Sprintf("keystest:%d:", time.Now().UnixNano())
	vars := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "TILEAPI_REDIS_PREFIX": prefix}
	getenv := func(k string) string { return vars[k] }
	keysRun := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"tileapi", "keys"}, args...), getenv, &stdout, &stderr)
		return stdout.String(), err
	}
	lastLine := func(out string) string {
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		return lines[len(lines)-1]
	}

	out, err := keysRun("create", "-plan", "free", "-kind", "publishable", "-name", "web")
	if err != nil {
		t.Fatal(err)
	}
	pub := lastLine(out)
	if !keys.Plausible(pub) || !keys.Declares(pub, keys.Publishable) || !strings.HasPrefix(out, "created publishable key 1 ") {
		t.Fatalf("create -kind publishable: %q", out)
	}
	if _, err := keysRun("create", "-plan", "free", "-kind", "public"); err == nil || !strings.Contains(err.Error(), `-kind: keys: kind "public"`) {
		t.Errorf("create -kind public: %v, want an error naming the kind", err)
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := keys.NewPostgres(pool)
	// Usage, charged as serve charges it.
	free, _ := plans.Defaults().Lookup("free")
	q := quota.NewRedis(quotatest.NewClient(t, redisURL), quota.WithPrefix(prefix+"q:"))
	for range 3 {
		if _, err := q.Charge(ctx, httpapi.KeyIdentity(keys.Key{ID: 1}), free.Quota, 2); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name string
		args []string
		out  string // a regular expression stdout must match
		err  string // what the error must contain, "" for none
	}{
		{"usage", []string{"usage", "1"}, `^key 1 \(tk_pub_[0-9a-f]{8}\) on plan free\nLIMIT +MAX +WINDOW +USED +REMAINING +RESETS IN\n(\S+ +\d+ +\S+ +6 +\d+ +\S+\n)+$`, ""},
		{"reset", []string{"reset", "1"}, `^key 1 \(tk_pub_[0-9a-f]{8}\): usage reset\n$`, ""},
		{"usage after reset", []string{"usage", "1"}, `\n(\S+ +\d+ +\S+ +0 +\d+ +\S+\n)+$`, ""},
		{"usage of no key", []string{"usage", "9"}, "", "keys: key not found: id 9"},
		{"usage without Redis", []string{"usage", "1", "-redis-url", ""}, "", "no Redis: usage lives in serve's Redis; set REDIS_URL or -redis-url"},
		{"reset without Redis", []string{"reset", "1", "-redis-url", ""}, "", "set REDIS_URL or -redis-url"},
		{"expire at", []string{"expire", "1", "-at", "2031-05-06T07:08:09Z"}, `^key 1 \(tk_pub_[0-9a-f]{8}\) expires at 2031-05-06T07:08:09Z\n$`, ""},
		{"list with an expiry", []string{"list"}, `\n1 +tk_pub_[0-9a-f]{8} +publishable +web +free +- +- +- +\S+Z +2031-05-06T07:08:09Z +-\n$`, ""},
		{"expire in", []string{"expire", "1", "-in", "720h"}, `^key 1 \(tk_pub_[0-9a-f]{8}\) expires at \S+Z\n$`, ""},
		{"expire never", []string{"expire", "1", "-never"}, `^key 1 \(tk_pub_[0-9a-f]{8}\) never expires\n$`, ""},
		{"expire, not said when", []string{"expire", "1"}, "", "say when: one of -at RFC3339, -in DURATION, -never"},
		{"expire, said twice", []string{"expire", "1", "-never", "-in", "1h"}, "", "say when"},
		{"expire at a bad time", []string{"expire", "1", "-at", "tomorrow"}, "", `-at "tomorrow": not an RFC 3339 time`},
		{"expire in the past", []string{"expire", "1", "-in", "-1h"}, "", "want a duration from now"},
		{"expire no key", []string{"expire", "9", "-never"}, "", "keys: key not found: id 9"},
		{"reroll a negative overlap", []string{"reroll", "1", "-overlap", "-1s"}, "", "-overlap -1s: want 0s or more"},
		{"reroll no key", []string{"reroll", "9"}, "", "keys: key not found: id 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := keysRun(tc.args...)
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
		})
	}
	if k, err := store.Get(ctx, 1); err != nil || !k.ExpiresAt.IsZero() {
		t.Errorf("key 1 after expire -never: %+v, %v", k, err)
	}

	// Reroll: a new secret of the same kind, printed last; the old one
	// works for the overlap.
	out, err = keysRun("reroll", "1", "-overlap", "1h")
	if err != nil {
		t.Fatal(err)
	}
	rerolled := lastLine(out)
	if !keys.Plausible(rerolled) || !keys.Declares(rerolled, keys.Publishable) || rerolled == pub ||
		!regexp.MustCompile(`^key 1 is now tk_pub_[0-9a-f]{8}; its old secret works until \S+Z\n`).MatchString(out) {
		t.Fatalf("reroll: %q", out)
	}
	x := keys.NewIndex(store, time.Minute)
	if err := x.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{pub, rerolled} {
		if k, err := x.Find(s); err != nil || k.ID != 1 {
			t.Errorf("find %s after the reroll: %+v, %v", keys.PrefixOf(s), k, err)
		}
	}
	if _, err := keysRun("reroll", "1", "-overlap", "0s"); err != nil {
		t.Fatal(err)
	}
	if err := x.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Find(rerolled); !errors.Is(err, keys.ErrRotated) {
		t.Errorf("find the secret rerolled with no overlap: %v, want ErrRotated", err)
	}
}
