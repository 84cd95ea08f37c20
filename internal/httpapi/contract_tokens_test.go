package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
)

// mintCall is POST /v1/tokens with body, by the key of secret.
func mintCall(secret, body string, status int) exchange {
	x := exchange{method: http.MethodPost, path: "/v1/tokens", body: body, status: status}
	if secret != "" {
		x.headers = []string{"Authorization", "Bearer " + secret}
	}
	return x
}

// refusedByDocument marks x as a request the document refuses too.
func (x exchange) refusedByDocument() exchange {
	x.refused = true
	return x
}

// withToken is x presenting token in place of a key.
func (x exchange) withToken(token string) exchange {
	x.headers = []string{"X-API-Key", token}
	return x
}

// POST /v1/tokens to each of its statuses, and the refusals of a token
// presented on the other routes.
func contractTokens(t *testing.T, c *contract, backend []option) {
	ctx := context.Background()
	e := newEnv(t, append(backend, withTokens())...)
	if _, err := e.keys.Add(ctx, "page", "std", "tk_pub_0123abcd_publishable-key-for-a-page"); err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: time.Now()}
	e.withClock(t, clock)
	mint := func(body string) string {
		t.Helper()
		_, b := c.check(t, e, mintCall("key-std", body, 200))
		var m minted
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m.Token
	}
	c.check(t, e, mintCall("key-std", "", 200))
	plain := mint(`{"ttl": "1m"}`)
	narrow := mint(`{"ttl": "1h", "routes": ["tiles", "within"], "layers": ["places"], "sets": ["places"], "bbox": [2.2, 48.8, 2.5, 48.9]}`)
	budgeted := mint(`{"budget": 100}`)
	for _, x := range []exchange{
		mintCall("key-std", `{"ttl": "2h"}`, 400),
		mintCall("key-std", `{"bbox": [3, 48, 2, 49]}`, 400),
		mintCall("key-std", `{"routes": ["tokens"]}`, 400),
		mintCall("key-std", `{"budget": 0}`, 400).refusedByDocument(),
		mintCall("key-std", `{"budget": 1.5}`, 400).refusedByDocument(),
		mintCall("key-std", `{"budget": 101}`, 400), // above std's smallest maximum, 100
		mintCall("key-std", `{"budgets": 10}`, 400).refusedByDocument(),
		mintCall("key-std", `not json`, 400).refusedByDocument(),
		mintCall("", `{}`, 401),
		mintCall("made-up", `{}`, 401),
		mintCall("tk_pub_0123abcd_publishable-key-for-a-page", `{}`, 403),
		mintCall(plain, `{}`, 403),
		get("/v1/geofence/within?lng=2.35&lat=48.85&radius=1000", 200).withToken(narrow),
		get("/v1/tiles/places/12/2074/1409.mvt", 200).withToken(narrow),
		get(contains, 200).withToken(plain),
		get("/v1/quota", 200).withToken(plain),
		get(contains, 200).withToken(budgeted),
		get("/v1/quota", 200).withToken(budgeted),
		get(contains, 403).withToken(narrow),                                              // route-not-allowed
		get("/v1/tiles/countries/5/16/11.mvt", 403).withToken(narrow),                     // layer-not-allowed
		get("/v1/tiles/places/12/2200/1409.mvt", 403).withToken(narrow),                   // outside-token-bounds
		get("/v1/geofence/within?lng=12.5&lat=41.9&radius=1000", 403).withToken(narrow),   // outside-token-bounds
		get("/v1/tiles/places.json", 401).withToken(plain[:len(plain)-4]),                 // invalid-token
		get("/v1/geofence/within?lng=2.35&lat=48.85&radius=30000", 422).withToken(narrow), // the key's plan still
	} {
		c.check(t, e, x)
	}
	clock.add(time.Minute)
	c.both(t, e, get(contains, 401).withToken(plain)) // expired-token

	// A revoked key mints nothing.
	k, err := e.keys.Lookup(ctx, hashOf("key-ten"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	c.check(t, e, mintCall("key-ten", `{}`, 403))

	// Tokens disabled.
	c.check(t, newEnv(t, backend...), mintCall("key-std", `{}`, 404))

	// Over the plan: a flat price above its max; then its limit spent.
	dear := newEnv(t, append(backend, withTokens(), func(t *testing.T, c *Config) {
		var err error
		if c.Plans, err = plans.Parse([]byte(dearPlans)); err != nil {
			t.Fatal(err)
		}
	})...)
	c.check(t, dear, mintCall("key-five", `{}`, 422))
	for i := range 6 {
		status := 200
		if i == 5 {
			status = 429
		}
		c.check(t, e, mintCall("key-five", `{}`, status))
	}

	// The key store down, for a key the index lacks: keys-unavailable.
	keysDown := newEnv(t, append(backend, withTokens(), func(t *testing.T, c *Config) {
		c.Keys = keys.NewIndex(keys.NewPostgres(emptySchema(t)), time.Second)
	})...)
	c.check(t, keysDown, mintCall("key-std", `{}`, 503))
}
