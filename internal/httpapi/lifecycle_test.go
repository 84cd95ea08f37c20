package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// adminJSON sends a JSON body to the admin API with the admin token.
func (e *env) adminJSON(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	return e.adminDo(t, method, path, strings.NewReader(body), "Authorization", "Bearer admin-secret", "Content-Type", "application/json")
}

// createKey makes a key of kind on plan through the admin API and returns
// its id and secret.
func (e *env) createKey(t *testing.T, kind, plan string) (int64, string) {
	t.Helper()
	var k struct {
		ID     int64  `json:"id"`
		Kind   string `json:"kind"`
		Prefix string `json:"prefix"`
		Secret string `json:"secret"`
	}
	decode(t, e.adminJSON(t, http.MethodPost, "/admin/keys", fmt.Sprintf(`{"name": "t", "plan": %q, "kind": %q}`, plan, kind)), http.StatusCreated, &k)
	if want := map[string]string{"": "secret"}[kind]; k.Kind != kind && k.Kind != want || k.Prefix != keys.PrefixOf(k.Secret) || !keys.Plausible(k.Secret) {
		t.Fatalf("created %+v, want a plausible %s key", k, kind)
	}
	return k.ID, k.Secret
}

// TestSecretFormat checks the refusals that the secret's form decides: a
// wrong checksum is unknown with no lookup and none of the network's
// allowance of unknown keys spent; a secret key in a browser is refused;
// neither is charged.
func TestSecretFormat(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			var store *countingKeys
			e := newEnv(t, append(mode.opts(t), withCountingKeys(&store, 1))...)
			_, sec := e.createKey(t, "secret", "free")
			_, pub := e.createKey(t, "publishable", "free")
			if _, dflt := e.createKey(t, "", "free"); !keys.Declares(dflt, keys.Secret) {
				t.Errorf("a key created with no kind is %q, want a secret one", dflt)
			}
			before := store.lookups.Load()
			const ip = "198.51.100.9"
			// One character changed: the checksum no longer holds.
			last := sec[len(sec)-1]
			bad := sec[:len(sec)-1] + map[bool]string{true: "1", false: "0"}[last == '0']
			for _, s := range []string{bad, bad[:40], "tk_pub_", pub + "x"} {
				for range 3 {
					var p problem
					decode(t, e.get(t, contains, "X-API-Key", s, "X-Forwarded-For", ip), http.StatusUnauthorized, &p)
					if p.Code != "unknown-key" {
						t.Errorf("%q: %+v, want unknown-key", s, p)
					}
				}
			}
			if n := store.lookups.Load() - before; n != 0 {
				t.Errorf("%d lookups for secrets with a wrong checksum, want none", n)
			}
			// The allowance (1) is whole: a plausible unknown key is
			// looked up once, the next refused.
			var p problem
			decode(t, e.get(t, contains, "X-API-Key", "made-up", "X-Forwarded-For", ip), http.StatusUnauthorized, &p)
			decode(t, e.get(t, contains, "X-API-Key", "made-up-2", "X-Forwarded-For", ip), http.StatusTooManyRequests, &p)

			for _, tc := range []struct {
				name, secret, origin string
				status               int
				code                 string
			}{
				{"secret key from a server", sec, "", http.StatusOK, ""},
				{"secret key from a browser", sec, "https://app.example.com", http.StatusForbidden, "secret-key-in-browser"},
				{"secret key by bearer from a browser", "Bearer " + sec, "null", http.StatusForbidden, "secret-key-in-browser"},
				{"publishable key from a browser", pub, "https://app.example.com", http.StatusOK, ""},
				{"a key of no kind from a browser", "key-free", "https://app.example.com", http.StatusOK, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					h := []string{"X-API-Key", tc.secret}
					if s, ok := strings.CutPrefix(tc.secret, "Bearer "); ok {
						h = []string{"Authorization", "Bearer " + s}
					}
					usedBefore := e.used(t, "X-API-Key", strings.TrimPrefix(tc.secret, "Bearer "))
					resp := e.get(t, contains, append(h, "Origin", tc.origin)...)
					if tc.status == http.StatusOK {
						decode(t, resp, http.StatusOK, nil)
						return
					}
					var p problem
					decode(t, resp, tc.status, &p)
					if p.Code != tc.code {
						t.Errorf("problem %+v, want %s", p, tc.code)
					}
					if after := e.used(t, "X-API-Key", strings.TrimPrefix(tc.secret, "Bearer ")); fmt.Sprint(after) != fmt.Sprint(usedBefore) {
						t.Errorf("used %v after the refusal, %v before: charged", after, usedBefore)
					}
				})
			}
		})
	}
}

// TestExpiry sets and clears a key's expiry through the admin API: an
// expired key is 401 expired-key with the time, uncharged.
func TestExpiry(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, mode.opts(t)...)
			id, secret := e.createKey(t, "secret", "free")
			path := fmt.Sprintf("/admin/keys/%d/expiry", id)
			decode(t, e.get(t, contains, "X-API-Key", secret), http.StatusOK, nil)
			used := e.used(t, "X-API-Key", secret)

			at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
			var k keyJSON
			decode(t, e.adminJSON(t, http.MethodPut, path, fmt.Sprintf(`{"expires_at": %q}`, at.Format(time.RFC3339))), http.StatusOK, &k)
			if k.ExpiresAt == nil || !k.ExpiresAt.Equal(at) {
				t.Errorf("key after set expiry: %+v", k)
			}
			var p problem
			resp := e.get(t, contains, "X-API-Key", secret)
			decode(t, resp, http.StatusUnauthorized, &p)
			if p.Code != "expired-key" || p.ExpiredAt != at.Format(time.RFC3339) || !strings.Contains(p.Detail, at.Format(time.RFC3339)) {
				t.Errorf("expired key: %+v, want expired-key at %s", p, at)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("a 401 without WWW-Authenticate")
			}
			// The quota route refuses it too, so used is read from the store.
			id2 := KeyIdentity(keys.Key{ID: id})
			p2, _ := e.server.cfg.Plans.Lookup("free")
			d, err := e.quota.Peek(context.Background(), id2, p2.Quota)
			if err != nil {
				t.Fatal(err)
			}
			if d.Limits[0].Used != used[0] {
				t.Errorf("used %d after the refusal, %d before", d.Limits[0].Used, used[0])
			}

			var cleared keyJSON
			decode(t, e.adminJSON(t, http.MethodPut, path, `{"expires_at": null}`), http.StatusOK, &cleared)
			if cleared.ExpiresAt != nil {
				t.Errorf("key after clearing its expiry: %+v", cleared)
			}
			decode(t, e.get(t, contains, "X-API-Key", secret), http.StatusOK, nil)
			later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			decode(t, e.adminJSON(t, http.MethodPut, path, fmt.Sprintf(`{"expires_at": %q}`, later.Format(time.RFC3339))), http.StatusOK, &k)
			decode(t, e.get(t, contains, "X-API-Key", secret), http.StatusOK, nil)

			for _, tc := range []struct{ body, field string }{
				{`{}`, "expires_at"},
				{`{"expires_at": "tomorrow"}`, "expires_at"},
				{`{"expires_at": 1700000000}`, "expires_at"},
				{`[]`, "body"},
				{`not json`, "body"},
			} {
				var p problem
				decode(t, e.adminJSON(t, http.MethodPut, path, tc.body), http.StatusBadRequest, &p)
				if p.Field != tc.field {
					t.Errorf("body %s: %+v, want a 400 naming %s", tc.body, p, tc.field)
				}
			}
			decode(t, e.adminJSON(t, http.MethodPut, "/admin/keys/999/expiry", `{"expires_at": null}`), http.StatusNotFound, nil)
		})
	}
}

// TestRerollAdmin rerolls through the admin API on one server: the new
// secret is answered once, the old one works for the overlap, and bad
// overlaps are 400s naming the field.
func TestRerollAdmin(t *testing.T) {
	e := newEnv(t)
	id, old := e.createKey(t, "publishable", "free")
	path := fmt.Sprintf("/admin/keys/%d/reroll", id)
	var k struct {
		keyJSON
		Secret string `json:"secret"`
	}
	decode(t, e.adminJSON(t, http.MethodPost, path, `{"overlap": "1h"}`), http.StatusOK, &k)
	if k.ID != id || k.Kind != keys.Publishable || !keys.Plausible(k.Secret) || k.Secret == old || k.PreviousValidUntil == nil {
		t.Fatalf("rerolled %+v", k)
	}
	for _, s := range []string{old, k.Secret} {
		decode(t, e.get(t, contains, "X-API-Key", s), http.StatusOK, nil)
	}
	// An empty body: the default overlap of a day.
	decode(t, e.adminJSON(t, http.MethodPost, path, ``), http.StatusOK, &k)
	if until := time.Until(*k.PreviousValidUntil); until < 23*time.Hour {
		t.Errorf("default overlap: previous valid until %v", k.PreviousValidUntil)
	}
	// No overlap: the previous secret stops at once.
	second := k.Secret
	decode(t, e.adminJSON(t, http.MethodPost, path, `{"overlap": "0s"}`), http.StatusOK, &k)
	var p problem
	decode(t, e.get(t, contains, "X-API-Key", second), http.StatusUnauthorized, &p)
	if p.Code != "rotated-key" || !strings.Contains(p.Detail, "stopped working at") {
		t.Errorf("the secret replaced with no overlap: %+v, want rotated-key", p)
	}
	decode(t, e.get(t, contains, "X-API-Key", k.Secret), http.StatusOK, nil)
	for _, body := range []string{`{"overlap": "-1h"}`, `{"overlap": "a day"}`, `{"overlap": 3600}`} {
		var p problem
		decode(t, e.adminJSON(t, http.MethodPost, path, body), http.StatusBadRequest, &p)
		if p.Field != "overlap" && !(body == `{"overlap": 3600}` && p.Field == "body") {
			t.Errorf("body %s: %+v, want a 400 naming overlap", body, p)
		}
	}
	decode(t, e.adminJSON(t, http.MethodPost, "/admin/keys/999/reroll", `{}`), http.StatusNotFound, nil)
}

// TestRerollTwoServers runs two servers on one key database and one Redis
// quota: after a reroll on one, both accept the old secret during the
// overlap and refuse it after, accept the new one throughout, and charge
// both secrets to the same key.
func TestRerollTwoServers(t *testing.T) {
	const refresh = 100 * time.Millisecond
	a, b := sharedServers(t, redisQuota(t, quotatest.NewClient(t, testenv.RedisURL(t))), refresh)
	id, old := a.createKey(t, "secret", "std")

	charged := int64(0)
	accept := func(e *env, secret string) {
		t.Helper()
		resp := e.get(t, contains, "X-API-Key", secret)
		decode(t, resp, http.StatusOK, nil)
		cost, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
		charged += cost
	}
	accept(a, old)
	accept(b, old)

	const overlap = 3 * time.Second
	var k struct {
		keyJSON
		Secret string `json:"secret"`
	}
	decode(t, a.adminJSON(t, http.MethodPost, fmt.Sprintf("/admin/keys/%d/reroll", id), fmt.Sprintf(`{"overlap": %q}`, overlap)), http.StatusOK, &k)
	until := *k.PreviousValidUntil
	// Both servers take the new secret at once: a, its index refreshed by
	// the reroll; b, by a lookup.
	accept(a, k.Secret)
	accept(b, k.Secret)
	// Within the overlap, with margin for a slow machine, both take the
	// old one.
	if time.Until(until) > overlap/2 {
		accept(a, old)
		accept(b, old)
	} else {
		t.Log("the machine is too slow to check the overlap itself")
	}

	// After it, both refuse it, b within its index refresh.
	time.Sleep(time.Until(until))
	for _, e := range []*env{a, b} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp := e.get(t, contains, "X-API-Key", old)
			if resp.StatusCode == http.StatusUnauthorized {
				var p problem
				decode(t, resp, http.StatusUnauthorized, &p)
				if p.Code != "rotated-key" {
					t.Errorf("the old secret after the overlap: %+v, want rotated-key", p)
				}
				break
			}
			decode(t, resp, http.StatusOK, nil)
			cost, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
			charged += cost
			if time.Now().After(deadline) {
				t.Fatal("the old secret still works 10s after its overlap")
			}
			time.Sleep(refresh / 4)
		}
		accept(e, k.Secret)
	}

	// Every request, old secret or new, on either server, was the key's.
	for _, e := range []*env{a, b} {
		var u usage
		decode(t, e.adminJSON(t, http.MethodGet, fmt.Sprintf("/admin/keys/%d/usage", id), ""), http.StatusOK, &u)
		if u.Limits[0].Used != charged {
			t.Errorf("the key has used %d units, want the %d its two secrets were charged", u.Limits[0].Used, charged)
		}
	}
}
