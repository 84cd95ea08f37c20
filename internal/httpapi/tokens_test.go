package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/tokens"
)

const testTokenSecret = "token-secret-0123456789abcdef-0123456789"

func withTokens() option { return with(func(c *Config) { c.TokenSecret = testTokenSecret }) }

// testClock is a settable clock for the server's Signer.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// withClock has e's tokens minted and verified at the time of c.
func (e *env) withClock(t *testing.T, c *testClock) {
	t.Helper()
	s, err := tokens.New([]byte(testTokenSecret), tokens.WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	e.server.tokens = s
}

type minted struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// mint has the key of secret mint a token with body, checking status.
func (e *env) mint(t *testing.T, secret, body string, status int) (minted, problem) {
	t.Helper()
	var (
		m minted
		p problem
	)
	resp := e.do(t, http.MethodPost, "/v1/tokens", strings.NewReader(body), "Authorization", "Bearer "+secret, "Content-Type", "application/json")
	if status == http.StatusOK {
		decode(t, resp, status, &m)
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("a token's response has Cache-Control %q, want no-store", cc)
		}
	} else {
		decode(t, resp, status, &p)
	}
	return m, p
}

func remaining(t *testing.T, resp *http.Response) int64 {
	t.Helper()
	n, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Remaining"), 10, 64)
	if err != nil {
		t.Fatalf("%s: X-RateLimit-Remaining %q", resp.Request.URL, resp.Header.Get("X-RateLimit-Remaining"))
	}
	return n
}

// A token minted by a key is charged to the key: the key's remaining
// budget goes down by what the token's requests cost, and the key and
// the token see the same usage. Minting is charged the flat price.
func TestTokenSharesTheKeysBudget(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, append(mode.opts(t), withTokens())...)
			first := e.get(t, contains, key("std")...)
			before := remaining(t, first)
			m, _ := e.mint(t, "key-std", `{"ttl": "10m"}`, http.StatusOK)
			if !strings.HasPrefix(m.Token, tokens.Prefix) {
				t.Fatalf("token %q", m.Token)
			}
			if at, err := time.Parse(time.RFC3339, m.ExpiresAt); err != nil || at.Before(time.Now().Add(9*time.Minute)) || at.After(time.Now().Add(11*time.Minute)) {
				t.Errorf("expires_at %q, want about 10 minutes from now", m.ExpiresAt)
			}
			left := before - 1 // minting costs the flat price
			for _, path := range []string{
				"/v1/geofence/within?lng=2.35&lat=48.85&radius=1000",
				contains,
				"/v1/tiles/places/12/2074/1409.mvt",
				"/v1/tiles/places.json",
			} {
				for _, header := range []string{"Authorization", "X-API-Key"} {
					v := m.Token
					if header == "Authorization" {
						v = "Bearer " + m.Token
					}
					resp := e.get(t, path, header, v)
					e.cacheWritten(t)
					cost, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
					if resp.StatusCode != http.StatusOK || cost <= 0 {
						t.Fatalf("%s with the token in %s: status %d, cost %d", path, header, resp.StatusCode, cost)
					}
					if settled := resp.Header.Get(headerSettledCost); settled != "" {
						cost, _ = strconv.ParseInt(settled, 10, 64)
					}
					if got := remaining(t, resp); got != left-cost {
						t.Fatalf("%s with the token: remaining %d, want %d (the key's %d less %d)", path, got, left-cost, left, cost)
					}
					left -= cost
				}
			}
			if got := remaining(t, e.get(t, contains, key("std")...)); got != left-1 {
				t.Errorf("the key's remaining after its token's requests: %d, want %d", got, left-1)
			}
			if byKey, byToken := e.used(t, key("std")...), e.used(t, "X-API-Key", m.Token); !slices.Equal(byKey, byToken) || byKey[0] != before+1-left+1 {
				t.Errorf("used by the key %v, by the token %v; want the same, %d", byKey, byToken, before+1-left+1)
			}
		})
	}
}

// A request outside what its token allows is refused 403, naming what,
// and is not charged.
func TestTokenNarrowing(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, append(mode.opts(t), withTokens())...)
			paris, _ := e.mint(t, "key-std", `{"routes": ["tiles", "within", "quota"], "layers": ["places"], "sets": ["places"], "bbox": [2.2, 48.8, 2.5, 48.9]}`, http.StatusOK)
			onlyBoundaries, _ := e.mint(t, "key-std", `{"sets": ["boundaries"]}`, http.StatusOK)
			allowed := []string{
				"/v1/tiles/places/12/2074/1409.mvt",
				"/v1/tiles/places/0/0/0.mvt", // its envelope meets the box
				"/v1/geofence/within?lng=2.35&lat=48.85&radius=1000",
				"/v1/geofence/places/within?lng=2.2&lat=48.9&radius=1000", // on the box's edge
			}
			for _, path := range allowed {
				if resp := e.get(t, path, "X-API-Key", paris.Token); resp.StatusCode != http.StatusOK {
					t.Errorf("%s: status %d, want 200", path, resp.StatusCode)
				}
			}
			e.cacheWritten(t)
			before := e.used(t, key("std")...)
			for _, tc := range []struct {
				token, path, code, field string
			}{
				{paris.Token, contains, "route-not-allowed", "routes"},
				{paris.Token, "/v1/tiles", "route-not-allowed", "routes"},
				{paris.Token, "/v1/geofence", "route-not-allowed", "routes"},
				{paris.Token, "/v1/tiles/places.json", "route-not-allowed", "routes"},
				{paris.Token, "/v1/tiles/countries/5/16/11.mvt", "layer-not-allowed", "layers"},
				{paris.Token, "/v1/tiles/places/12/2200/1409.mvt", "outside-token-bounds", "bbox"},
				{paris.Token, "/v1/geofence/within?lng=12.5&lat=41.9&radius=1000", "outside-token-bounds", "bbox"},
				{paris.Token, "/v1/geofence/within?lng=2.35&lat=48.95&radius=1000", "outside-token-bounds", "bbox"},
				{onlyBoundaries.Token, "/v1/geofence/within?lng=2.35&lat=48.85&radius=1000", "set-not-allowed", "sets"},
				{onlyBoundaries.Token, "/v1/quota", "", ""}, // allowed: no routes named
				{paris.Token, "/v1/quota", "", ""},
			} {
				resp := e.get(t, tc.path, "X-API-Key", tc.token)
				if tc.code == "" {
					decode(t, resp, http.StatusOK, nil)
					continue
				}
				var p problem
				decode(t, resp, http.StatusForbidden, &p)
				if p.Code != tc.code || p.Field != tc.field {
					t.Errorf("%s: %s field %q, want %s field %q", tc.path, p.Code, p.Field, tc.code, tc.field)
				}
			}
			if after := e.used(t, key("std")...); !slices.Equal(before, after) {
				t.Errorf("refusals were charged: used %v -> %v", before, after)
			}
			// Within the parent key's plan still: a token is no wider.
			var p problem
			decode(t, e.get(t, "/v1/geofence/within?lng=2.35&lat=48.85&radius=30000", "X-API-Key", paris.Token), http.StatusUnprocessableEntity, &p)
			if p.Code != "radius-exceeds-plan" {
				t.Errorf("a radius over the plan with a token: %+v", p)
			}
		})
	}
}

// A token works until its exp and is refused 401 expired-token after,
// with the time; a token naming another lifetime or signed otherwise is
// refused 401 invalid-token, uncharged.
func TestTokenExpiry(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, append(mode.opts(t), withTokens())...)
			c := &testClock{t: time.Now()}
			e.withClock(t, c)
			m, _ := e.mint(t, "key-std", `{"ttl": "1m"}`, http.StatusOK)
			if resp := e.get(t, contains, "X-API-Key", m.Token); resp.StatusCode != http.StatusOK {
				t.Fatalf("a fresh token: status %d", resp.StatusCode)
			}
			c.add(time.Minute)
			before := e.used(t, key("std")...)
			var p problem
			decode(t, e.get(t, contains, "X-API-Key", m.Token), http.StatusUnauthorized, &p)
			if p.Code != "expired-token" || p.ExpiredAt != m.ExpiresAt {
				t.Errorf("an expired token: %+v, want expired-token at %s", p, m.ExpiresAt)
			}
			other, err := tokens.New([]byte("another secret, long enough to sign........"), tokens.WithClock(c.now))
			if err != nil {
				t.Fatal(err)
			}
			forged, _, _ := other.Mint(1, time.Minute, tokens.Narrowing{})
			for _, bad := range []string{forged, m.Token[:len(m.Token)-3], tokens.Prefix + "x"} {
				resp := e.get(t, contains, "X-API-Key", bad)
				decode(t, resp, http.StatusUnauthorized, &p)
				if p.Code != "invalid-token" || resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("token %.20s...: %+v", bad, p)
				}
			}
			if after := e.used(t, key("std")...); !slices.Equal(before, after) {
				t.Errorf("refused tokens were charged: used %v -> %v", before, after)
			}
		})
	}
}

// A revoked parent key's tokens are refused at the index's next refresh,
// as the key is; a key made on another server since this one's last
// refresh is found by a refresh.
func TestTokenParentKey(t *testing.T) {
	ctx := context.Background()
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, append(mode.opts(t), withTokens())...)
			k, secret, err := e.keys.Create(ctx, "parent", "std")
			if err != nil {
				t.Fatal(err)
			}
			m, _ := e.mint(t, secret, `{}`, http.StatusOK)
			if resp := e.get(t, contains, "X-API-Key", m.Token); resp.StatusCode != http.StatusOK {
				t.Fatalf("a token of a new key: status %d", resp.StatusCode)
			}
			if _, err := e.keys.Revoke(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
			if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			var p problem
			decode(t, e.get(t, contains, "X-API-Key", m.Token), http.StatusForbidden, &p)
			if p.Code != "revoked-key" {
				t.Errorf("a revoked key's token: %+v", p)
			}
			e.mint(t, secret, `{}`, http.StatusForbidden)

			// A second server over the same store and secret, whose index
			// has not seen the key yet.
			other := newEnv(t, append(mode.opts(t), withTokens(), with(func(c *Config) {
				c.Keys, c.KeyAdmin = keys.NewIndex(e.keys, time.Hour), e.keys
			}))...)
			_, fresh, err := e.keys.Create(ctx, "fresh", "std")
			if err != nil {
				t.Fatal(err)
			}
			m, _ = e.mint(t, fresh, `{}`, http.StatusOK)
			time.Sleep(1100 * time.Millisecond) // past RefreshIfOlder's second since other's first refresh
			if resp := other.get(t, contains, "X-API-Key", m.Token); resp.StatusCode != http.StatusOK {
				t.Errorf("a token of a key the index did not hold: status %d", resp.StatusCode)
			}
		})
	}
}

// POST /v1/tokens: a secret key alone mints; the body is checked, each
// fault a 400 naming its field; without a secret configured, 404
// tokens-disabled, and a presented token is 401.
func TestMintToken(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, withTokens())
	if _, err := e.keys.Add(ctx, "page", "std", "tk_pub_0123abcd_publishable-key-for-a-page"); err != nil {
		t.Fatal(err)
	}
	m, _ := e.mint(t, "key-std", "", http.StatusOK) // no body: the defaults
	for _, tc := range []struct {
		secret, body string
		status       int
		code, field  string
	}{
		{"tk_pub_0123abcd_publishable-key-for-a-page", `{}`, http.StatusForbidden, "secret-key-required", ""},
		{m.Token, `{}`, http.StatusForbidden, "secret-key-required", ""},
		{"no-such-key", `{}`, http.StatusUnauthorized, "unknown-key", ""},
		{"key-std", `[1]`, http.StatusBadRequest, "invalid-parameter", "body"},
		{"key-std", `{} {}`, http.StatusBadRequest, "invalid-parameter", "body"},
		{"key-std", `{"ttl": "2h"}`, http.StatusBadRequest, "invalid-parameter", "ttl"},
		{"key-std", `{"ttl": "10s"}`, http.StatusBadRequest, "invalid-parameter", "ttl"},
		{"key-std", `{"ttl": 900}`, http.StatusBadRequest, "invalid-parameter", "ttl"},
		{"key-std", `{"routes": ["tokens"]}`, http.StatusBadRequest, "invalid-parameter", "routes"},
		{"key-std", `{"routes": "tiles"}`, http.StatusBadRequest, "invalid-parameter", "routes"},
		{"key-std", `{"layers": ["nope"]}`, http.StatusBadRequest, "invalid-parameter", "layers"},
		{"key-std", `{"sets": ["nope"]}`, http.StatusBadRequest, "invalid-parameter", "sets"},
		{"key-std", `{"bbox": [3, 48, 2, 49]}`, http.StatusBadRequest, "invalid-parameter", "bbox"},
		{"key-std", `{"bbox": [2, 48, 3]}`, http.StatusBadRequest, "invalid-parameter", "bbox"},
		{"key-std", `{"bbox": [2, 48, 3, 91]}`, http.StatusBadRequest, "invalid-parameter", "bbox"},
		{"key-std", `{"budget": 0}`, http.StatusBadRequest, "invalid-parameter", "budget"},
		{"key-std", `{"budget": -3}`, http.StatusBadRequest, "invalid-parameter", "budget"},
		{"key-std", `{"budget": 2.5}`, http.StatusBadRequest, "invalid-parameter", "budget"},
		{"key-std", `{"budget": "10"}`, http.StatusBadRequest, "invalid-parameter", "budget"},
		{"key-std", `{"budget": 101}`, http.StatusBadRequest, "invalid-parameter", "budget"}, // std's burst is 100
		{"key-std", `{"budgets": 10}`, http.StatusBadRequest, "invalid-parameter", "budgets"},
	} {
		_, p := e.mint(t, tc.secret, tc.body, tc.status)
		if p.Code != tc.code || p.Field != tc.field {
			t.Errorf("%.12s %s: %s field %q, want %s field %q", tc.secret, tc.body, p.Code, p.Field, tc.code, tc.field)
		}
	}
	var p problem
	decode(t, e.do(t, http.MethodPost, "/v1/tokens", nil), http.StatusUnauthorized, &p)
	if p.Code != "missing-key" {
		t.Errorf("no key: %+v", p)
	}

	off := newEnv(t)
	if _, p := off.mint(t, "key-std", `{}`, http.StatusNotFound); p.Code != "tokens-disabled" {
		t.Errorf("tokens disabled: %+v", p)
	}
	decode(t, off.get(t, contains, "X-API-Key", m.Token), http.StatusUnauthorized, &p)
	if p.Code != "invalid-token" {
		t.Errorf("a token where tokens are disabled: %+v", p)
	}
}
