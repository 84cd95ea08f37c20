package httpapi

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
)

// eachMode runs f against the embedded mode (everything in process) and
// against real Redis and PostGIS.
func eachMode(t *testing.T, f func(t *testing.T, opts ...option)) {
	t.Run("embedded", func(t *testing.T) { f(t) })
	t.Run("redis+postgis", func(t *testing.T) { f(t, withRedis(testenv.RedisURL(t)), withPostGIS()) })
}

const contains = "/v1/geofence/contains?lng=2.35&lat=48.85"

// The classic scenarios over HTTP: 5 per 10 s gives five 200s then a 429
// with Retry-After; 10 per 1 s gives ten 200s then two 429s.
func TestClassicScenarios(t *testing.T) {
	eachMode(t, func(t *testing.T, opts ...option) {
		e := newEnv(t, opts...)
		for _, tc := range []struct {
			plan       string
			calls, oks int
			retryAfter string
		}{{"five", 6, 5, "10"}, {"ten", 12, 10, "1"}} {
			var got []int
			for range tc.calls {
				resp := e.get(t, contains, key(tc.plan)...)
				got = append(got, resp.StatusCode)
				if resp.StatusCode == http.StatusTooManyRequests {
					if ra := resp.Header.Get("Retry-After"); ra != tc.retryAfter {
						t.Errorf("%s: Retry-After = %q, want %q", tc.plan, ra, tc.retryAfter)
					}
					var p problem
					decode(t, resp, http.StatusTooManyRequests, &p)
					if p.Code != "quota-exceeded" || p.RetryAfterMS <= 0 || p.Limit == "" {
						t.Errorf("%s: 429 body = %+v", tc.plan, p)
					}
				}
			}
			want := slices.Repeat([]int{200}, tc.oks)
			want = append(want, slices.Repeat([]int{429}, tc.calls-tc.oks)...)
			if !slices.Equal(got, want) {
				t.Errorf("%s: statuses %v, want %v", tc.plan, got, want)
			}
		}
	})
}

func TestHeadersExact(t *testing.T) {
	e := newEnv(t)
	resp := e.get(t, "/v1/geofence/within?lng=2.35&lat=48.85&radius=5000", key("std")...)
	want := map[string]string{
		"RateLimit-Policy":      `"burst";q=100;w=5, "minute";q=600;w=60`,
		"RateLimit":             `"burst";r=93;t=5, "minute";r=593;t=60`,
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "93",
		"X-RateLimit-Reset":     "5",
		"X-RateLimit-Cost":      "7", // ceil((5000/2000)^2)
		"X-Quota-Status":        "charged",
		"Content-Type":          "application/geo+json",
	}
	for h, v := range want {
		if got := resp.Header.Get(h); got != v {
			t.Errorf("%s: %q, want %q", h, got, v)
		}
	}
}

// Cost grows with the searched area; a radius beyond what the plan can ever
// pay for is a 422 saying what would fit, and is not charged.
func TestRadiusCost(t *testing.T) {
	eachMode(t, func(t *testing.T, opts ...option) {
		e := newEnv(t, opts...)
		for _, tc := range []struct {
			radius, cost string
		}{{"1000", "1"}, {"2000", "1"}, {"4000", "4"}, {"10000", "25"}} {
			resp := e.get(t, "/v1/geofence/within?lng=-73.98&lat=40.75&limit=5&radius="+tc.radius, key("pro")...)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Cost") != tc.cost {
				t.Errorf("radius %s: status %d cost %q, want 200 and %s", tc.radius, resp.StatusCode, resp.Header.Get("X-RateLimit-Cost"), tc.cost)
			}
		}
		before := e.used(t, key("std")...)
		// 20 km costs 100 units: std's burst limit is 100, so it fits; a plan
		// whose largest limit is 5 cannot pay for 5 km (7 units).
		var p problem
		decode(t, e.get(t, "/v1/geofence/within?lng=2.35&lat=48.85&radius=5000", key("five")...), http.StatusUnprocessableEntity, &p)
		if p.Code != "cost-exceeds-plan" || p.Cost != 7 || p.MaxCost != 5 || p.Field != "radius" || p.MaxRadius != 4472 {
			t.Errorf("422 body = %+v, want cost 7, max_cost 5, max_radius_m 4472", p)
		}
		decode(t, e.get(t, "/v1/geofence/within?lng=2.35&lat=48.85&radius=30000", key("std")...), http.StatusUnprocessableEntity, &p)
		if p.Code != "radius-exceeds-plan" || p.MaxRadius != 20000 {
			t.Errorf("422 body = %+v, want the plan's max radius", p)
		}
		if after := e.used(t, key("std")...); !slices.Equal(before, after) {
			t.Errorf("a 422 was charged: used %v -> %v", before, after)
		}
	})
}

// A 422, a request over the plan whatever its limits hold, has no
// Retry-After (nor retry_after_ms): no wait admits it. Neither before the
// key's limit is spent nor after, when a 429 of a request that fits does
// say when.
func TestUnprocessableHasNoRetryAfter(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, mode.opts(t)...)
			overPlan := map[string]string{
				"/v1/geofence/within?lng=2.35&lat=48.85&radius=5000":  "cost-exceeds-plan",
				"/v1/geofence/within?lng=2.35&lat=48.85&radius=30000": "radius-exceeds-plan",
				"/v1/tiles/countries/0/0/0.mvt":                       "cost-exceeds-plan",
			}
			refused := func(when string) {
				t.Helper()
				for path, code := range overPlan {
					resp := e.get(t, path, key("five")...)
					var p struct {
						Code         string `json:"code"`
						RetryAfterMS *int64 `json:"retry_after_ms"`
					}
					decode(t, resp, http.StatusUnprocessableEntity, &p)
					if ra := resp.Header.Values("Retry-After"); p.Code != code || len(ra) != 0 || p.RetryAfterMS != nil {
						t.Errorf("%s %s: code %q, Retry-After %q, retry_after_ms %v; want %q and no retry time",
							when, path, p.Code, ra, p.RetryAfterMS, code)
					}
				}
			}
			refused("with the limit unused")
			for range 5 {
				if resp := e.get(t, contains, key("five")...); resp.StatusCode != http.StatusOK {
					t.Fatalf("spending plan five's limit: status %d", resp.StatusCode)
				}
			}
			if resp := e.get(t, contains, key("five")...); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("a sixth request: status %d, Retry-After %q; want a 429 with one", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			refused("with the limit spent")
		})
	}
}

// Tiles cost more the lower their zoom; a cached tile costs less than a
// rendered one; ETag answers 304; gzip or deflate when asked.
func TestTiles(t *testing.T) {
	eachMode(t, func(t *testing.T, opts ...option) {
		e := newEnv(t, opts...)
		for _, tc := range []struct {
			path, cache, cost string
		}{
			{"/v1/tiles/places/12/2074/1409.mvt", "MISS", "1"},
			{"/v1/tiles/places/9/259/176.mvt", "MISS", "4"},
			{"/v1/tiles/places/2/2/1.mvt", "MISS", "16"},
			{"/v1/tiles/places/2/2/1.mvt", "HIT", "4"},
			{"/v1/tiles/countries/0/0/0.pbf", "MISS", "8"},
			{"/v1/tiles/countries/0/0/0.mvt", "HIT", "2"},
		} {
			resp := e.get(t, tc.path, key("pro")...)
			body, _ := io.ReadAll(resp.Body)
			e.cacheWritten(t)
			if resp.StatusCode != 200 || resp.Header.Get("X-Tile-Cache") != tc.cache || resp.Header.Get("X-RateLimit-Cost") != tc.cost {
				t.Errorf("%s: status %d cache %q cost %q, want 200 %s %s", tc.path, resp.StatusCode,
					resp.Header.Get("X-Tile-Cache"), resp.Header.Get("X-RateLimit-Cost"), tc.cache, tc.cost)
			}
			if resp.Header.Get("Content-Type") != "application/vnd.mapbox-vector-tile" || len(body) == 0 || resp.Header.Get("Cache-Control") != "private, max-age=3600" {
				t.Errorf("%s: content type %q, %d bytes, cache-control %q", tc.path, resp.Header.Get("Content-Type"), len(body), resp.Header.Get("Cache-Control"))
			}
		}
		first := e.get(t, "/v1/tiles/places/2/2/1.mvt", key("pro")...)
		etag := first.Header.Get("ETag")
		if etag == "" {
			t.Fatal("no ETag")
		}
		if resp := e.get(t, "/v1/tiles/places/2/2/1.mvt", append(key("pro"), "If-None-Match", etag)...); resp.StatusCode != http.StatusNotModified {
			t.Errorf("If-None-Match: status %d, want 304", resp.StatusCode)
		}
		// The transport would undo gzip by itself; ask for it explicitly.
		// Each encoding, made by klauspost/compress, decodes with the
		// standard library's readers to the very bytes of the tile.
		plain := e.get(t, "/v1/tiles/places/2/2/1.mvt", append(key("pro"), "Accept-Encoding", "identity")...)
		tile, err := io.ReadAll(plain.Body)
		if err != nil || len(tile) == 0 || plain.Header.Get("Content-Encoding") != "" {
			t.Fatalf("the tile uncompressed: %d bytes, %v, Content-Encoding %q", len(tile), err, plain.Header.Get("Content-Encoding"))
		}
		for _, enc := range []string{"gzip", "deflate"} {
			resp := e.get(t, "/v1/tiles/places/2/2/1.mvt", append(key("pro"), "Accept-Encoding", enc)...)
			if resp.Header.Get("Content-Encoding") != enc || !slices.Contains(resp.Header.Values("Vary"), "Accept-Encoding") {
				t.Fatalf("Content-Encoding %q, Vary %q; want %s, and Accept-Encoding", resp.Header.Get("Content-Encoding"), resp.Header.Values("Vary"), enc)
			}
			var zr io.Reader = flate.NewReader(resp.Body)
			if enc == "gzip" {
				if zr, err = gzip.NewReader(resp.Body); err != nil {
					t.Fatal(err)
				}
			}
			if b, err := io.ReadAll(zr); err != nil || !bytes.Equal(b, tile) {
				t.Errorf("%s tile: %d bytes, %v; want the %d of the tile", enc, len(b), err, len(tile))
			}
		}
	})
}

// Bad input is a 400 naming the field, and is never charged.
func TestBadInputNotCharged(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ path, field string }{
		{"/v1/geofence/within?lng=200&lat=0&radius=10", "lng"},
		{"/v1/geofence/within?lng=0&lat=NaN&radius=10", "lat"},
		{"/v1/geofence/within?lng=0&lat=0&radius=-1", "radius"},
		{"/v1/geofence/within?lng=0&lat=0&radius=10&limit=0", "limit"},
		{"/v1/geofence/within?lng=0&lat=0", "radius"},
		{"/v1/geofence/contains?lng=0&lat=x", "lat"},
		{"/v1/geofence/contains?lng=0&lat=0&geometry=maybe", "geometry"},
		{"/v1/geofence/contains?lng=0&lat=0&geometry=1", "geometry"},
		{"/v1/tiles/places/2/4/0.mvt", "x"},
		{"/v1/tiles/places/2/0/-1.mvt", "y"},
		{"/v1/tiles/counties/1/0/0.mvt", "z"},
		{"/v1/tiles/rivers/1/0/0.mvt", "layer"},
		{"/v1/tiles/rivers.json", "layer"},
	} {
		var p problem
		resp := e.get(t, tc.path, key("std")...)
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q", tc.path, ct)
		}
		decode(t, resp, http.StatusBadRequest, &p)
		if p.Field != tc.field || p.Code != "invalid-parameter" || !strings.Contains(p.Detail, tc.field) {
			t.Errorf("%s: problem %+v, want field %q", tc.path, p, tc.field)
		}
	}
	if u := e.used(t, key("std")...); !slices.Equal(u, []int64{0, 0}) {
		t.Errorf("bad requests were charged: used %v", u)
	}
}

// A request whose work fails after the charge is refunded: here the
// database has no tables (a real PostGIS error, not a mock).
func TestRefundOnFailedQuery(t *testing.T) {
	e := newEnv(t, withRedis(testenv.RedisURL(t)), func(t *testing.T, c *Config) {
		withPostGIS()(t, c) // for the dataset's tables...
		c.Geofence = brokenPostGIS(t)
	})
	resp := e.get(t, contains, key("std")...)
	var p problem
	decode(t, resp, http.StatusInternalServerError, &p)
	if p.Code != "internal" || strings.Contains(p.Detail, "relation") {
		t.Errorf("500 body leaks or is wrong: %+v", p)
	}
	// It was charged, then refunded, and its headers say so.
	if st, cost := resp.Header.Get(headerStatus), resp.Header.Get("X-RateLimit-Cost"); st != statusRefunded || cost != "0" {
		t.Errorf("the failed request: %s %q, cost %q; want refunded, 0", headerStatus, st, cost)
	}
	if rl := resp.Header.Get("RateLimit"); !strings.Contains(rl, `"burst";r=100;`) || !strings.Contains(rl, `"minute";r=600;`) {
		t.Errorf("RateLimit %q does not show the units given back", rl)
	}
	if u := e.used(t, key("std")...); !slices.Equal(u, []int64{0, 0}) {
		t.Errorf("failed request not refunded: used %v", u)
	}
	// The usage history holds the charge and its refund: nothing settled.
	if u := e.usageTotal(t, key("std")...); u.Requests != 1 || u.Charged == 0 || u.GivenBack != u.Charged || u.Settled != 0 {
		t.Errorf("usage of the refunded request: %+v, want 1 request, its charge given back", u)
	}
}

func TestKeys(t *testing.T) {
	e := newEnv(t)
	var p problem
	decode(t, e.get(t, contains, "X-API-Key", "no-such-key"), http.StatusUnauthorized, &p)
	if p.Code != "unknown-key" {
		t.Errorf("unknown key: %+v", p)
	}
	if resp := e.get(t, contains, "Authorization", "Bearer key-std"); resp.StatusCode != 200 {
		t.Errorf("bearer key: status %d", resp.StatusCode)
	}
	// A key revoked in the store (by another server) stops working at the
	// index's next refresh.
	k, _ := e.keys.Lookup(context.Background(), hashOf("key-ten"))
	if _, err := e.keys.Revoke(context.Background(), k.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	decode(t, e.get(t, contains, key("ten")...), http.StatusForbidden, &p)
	if p.Code != "revoked-key" {
		t.Errorf("revoked key: %+v", p)
	}
}

// Without a key a request is charged to the anonymous plan by client IP;
// an X-Forwarded-For from an untrusted peer is ignored, so a client cannot
// pick a fresh budget; from a trusted proxy it is believed.
func TestAnonymousAndClientIP(t *testing.T) {
	e := newEnv(t)
	budget := 30 // the anonymous burst limit
	for i := range budget + 1 {
		resp := e.get(t, contains, "X-Forwarded-For", "198.51.100."+strings.Repeat("1", 1+i%3))
		if want := i < budget; (resp.StatusCode == 200) != want {
			t.Fatalf("anonymous request %d: status %d; spoofed X-Forwarded-For must not reset the budget", i, resp.StatusCode)
		}
	}

	trusted := newEnv(t, with(func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32"} }))
	for i := range budget {
		trusted.get(t, contains, "X-Forwarded-For", "198.51.100.1")
		_ = i
	}
	if resp := trusted.get(t, contains, "X-Forwarded-For", "198.51.100.1"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("client behind a trusted proxy: status %d after its budget, want 429", resp.StatusCode)
	}
	if resp := trusted.get(t, contains, "X-Forwarded-For", "198.51.100.2"); resp.StatusCode != 200 {
		t.Errorf("another client behind the trusted proxy: status %d, want 200", resp.StatusCode)
	}

	closed := newEnv(t, with(func(c *Config) { c.NoAnonymous = true }))
	var p problem
	decode(t, closed.get(t, contains), http.StatusUnauthorized, &p)
	if p.Code != "missing-key" {
		t.Errorf("no key with anonymous access off: %+v", p)
	}
}

// Health, readiness, metrics, the OpenAPI document and the quota itself are
// never charged.
func TestUnmeteredRoutes(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json", "/v1/quota", "/v1/usage"} {
		for range 3 {
			if resp := e.get(t, path, key("five")...); resp.StatusCode != 200 {
				t.Errorf("%s: status %d", path, resp.StatusCode)
			}
		}
	}
	if u := e.used(t, key("five")...); !slices.Equal(u, []int64{0}) {
		t.Errorf("unmetered routes were charged: used %v", u)
	}
}

// When the key store fails (here a real database without the keys table),
// a key the index does not hold is a 503 to retry, and nothing is charged.
func TestKeyStoreDown(t *testing.T) {
	e := newEnv(t, func(t *testing.T, c *Config) {
		pool, err := pgxpool.New(context.Background(), spatialtest.Schema(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		c.Keys = keys.NewIndex(keys.NewPostgres(pool), time.Second)
	})
	var p problem
	resp := e.get(t, contains, key("std")...)
	decode(t, resp, http.StatusServiceUnavailable, &p)
	if p.Code != "keys-unavailable" || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-RateLimit-Cost") != "" {
		t.Errorf("key store down: %+v, Retry-After %q, cost %q", p, resp.Header.Get("Retry-After"), resp.Header.Get("X-RateLimit-Cost"))
	}
}

// A key the index holds keeps working while the key store is down: here
// the store's database connections are closed after the index was loaded.
func TestIndexedKeysOutliveTheKeyStore(t *testing.T) {
	pool := spatialtest.Migrated(t)
	ks := keys.NewPostgres(pool)
	if _, err := ks.Add(context.Background(), "std", "std", "key-std-pg"); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, with(func(c *Config) { c.Keys = keys.NewIndex(ks, time.Minute) }))
	if resp := e.get(t, contains, "X-API-Key", "key-std-pg"); resp.StatusCode != 200 {
		t.Errorf("indexed key: status %d", resp.StatusCode)
	}
	pool.Close() // the key store is down from here
	if resp := e.get(t, contains, "X-API-Key", "key-std-pg"); resp.StatusCode != 200 || resp.Header.Get(headerStatus) != statusCharged {
		t.Errorf("indexed key with the key store down: status %d, %s %q", resp.StatusCode, headerStatus, resp.Header.Get(headerStatus))
	}
	var p problem
	decode(t, e.get(t, contains, "X-API-Key", "key-not-indexed"), http.StatusServiceUnavailable, &p)
	if p.Code != "keys-unavailable" {
		t.Errorf("a key the index lacks, store down: %+v", p)
	}
}
