package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/dataversion"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/redisbatch"
	"github.com/tileapi/tileapi/tiles"
)

func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

// testPlans are the plans of the tests, beside the defaults: the classic
// scenarios, a two-limit plan with known numbers, and a customer's plan
// (team) with its members'. They keep a day of history, so overrides may
// add windows of up to a day (plans.File.History).
const testPlans = `{"history": "24h", "plans": [
	{"name": "five", "max_radius_m": 20000, "limits": [{"name": "ten-seconds", "max": 5, "window": "10s"}]},
	{"name": "ten", "max_radius_m": 20000, "limits": [{"name": "second", "max": 10, "window": "1s"}]},
	{"name": "std", "max_radius_m": 20000, "limits": [{"name": "burst", "max": 100, "window": "5s"}, {"name": "minute", "max": 600, "window": "1m"}]},
	{"name": "daily", "max_radius_m": 20000, "time_zone": "America/New_York", "limits": [{"name": "burst", "max": 100, "window": "5s"}, {"name": "day", "max": 5, "period": "day"}]},
	{"name": "two", "max_radius_m": 20000, "max_in_flight": 2, "limits": [{"name": "minute", "max": 1000, "window": "1m"}]},
	{"name": "team", "max_radius_m": 20000, "limits": [{"name": "minute", "max": 60, "window": "1m"}]},
	{"name": "member", "max_radius_m": 20000, "limits": [{"name": "minute", "max": 25, "window": "1m"}]},
	{"name": "work", "max_radius_m": 20000, "limits": [{"name": "minute", "max": 1000, "window": "1m"}],
	 "cost": {"radius_unit_m": 2000, "hit_divisor": 4, "flat": 1, "settle": {"per_ms": 0, "per_feature": 1},
	          "tiles": {"places": {"ref_zoom": 10, "max": 16}, "counties": {"ref_zoom": 8, "max": 16}, "countries": {"ref_zoom": 4, "max": 8}}}}
]}`

// Test keys: the secret of each is "key-" + its plan.
var testKeyPlans = []string{"five", "ten", "std", "free", "pro", "two", "work", "daily"}

var embedded struct {
	once sync.Once
	d    *dataset.Dataset
	err  error
}

// memoryDataset loads the bundled dataset once per test binary.
func memoryDataset(tb testing.TB) *dataset.Dataset {
	embedded.once.Do(func() { embedded.d, embedded.err = dataset.Load() })
	if embedded.err != nil {
		tb.Fatal(embedded.err)
	}
	return embedded.d
}

// env is a running server and what the test needs to reach inside it.
type env struct {
	server *Server
	srv    *httptest.Server // the public handler
	admin  *httptest.Server // the admin handler
	keys   *keys.Memory
	quota  Quota
	reg    *prometheus.Registry
}

type option func(*testing.T, *Config)

// withRedis puts the quota and the tile cache in Redis at url.
func withRedis(url string) option {
	return func(t *testing.T, c *Config) {
		rdb := quotatest.NewClient(t, url) // as serve opens it
		redisbatch.Enable(rdb)             // as serve does by default
		prefix := fmt.Sprintf("httpapitest:%d:%s:", time.Now().UnixNano(), t.Name())
		c.Quota = quota.NewRedis(rdb, quota.WithPrefix(prefix))
		c.InFlight = inflight.NewRedis(rdb, inflight.WithPrefix(prefix+"f:"))
		c.TileCache = tilecache.NewRedis(rdb, prefix+"tile:", time.Minute)
	}
}

// withPostGIS serves the bundled dataset from PostGIS.
func withPostGIS() option {
	return func(t *testing.T, c *Config) {
		pool, _ := spatialtest.Loaded(t)
		c.Geofence, c.Tiles = geofence.NewPostGIS(pool, 5*time.Second), tiles.NewPostGIS(pool, 5*time.Second)
		c.DataVersion = dataversion.Fixed("postgis")
	}
}

func with(f func(*Config)) option { return func(_ *testing.T, c *Config) { f(c) } }

// newEnv starts a server with in-memory backends, unless options say
// otherwise, and the test keys.
func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(testPlans), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := plans.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := memoryDataset(t)
	ks := keys.NewMemory()
	for _, p := range testKeyPlans {
		if _, err := ks.Add(context.Background(), p, p, "key-"+p); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	cfg := Config{
		Quota:       quota.NewMemory(nil),
		InFlight:    inflight.NewMemory(),
		Geofence:    geofence.NewMemory(d),
		Tiles:       tiles.NewMemory(d),
		TileCache:   tilecache.NewMemory(1<<20, time.Minute),
		Keys:        keys.NewIndex(ks, 50*time.Millisecond),
		KeyAdmin:    ks,
		Plans:       ps,
		DataVersion: dataversion.Fixed("test"),
		AdminToken:  "admin-secret",
		Registry:    reg,
		// Roomy, so that a busy machine does not fail tests that are not
		// about the budget; those that are set their own.
		QuotaTimeout: time.Second,
	}
	for _, o := range opts {
		o(t, &cfg)
	}
	if x, ok := cfg.Keys.(*keys.Index); ok {
		// As serve does; a test of a failing key store finds it failing.
		if err := x.Refresh(context.Background()); err != nil {
			t.Log(err)
		}
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, admin := httptest.NewServer(s), httptest.NewServer(s.AdminHandler())
	t.Cleanup(srv.Close)
	t.Cleanup(admin.Close)
	return &env{server: s, srv: srv, admin: admin, keys: ks, quota: cfg.Quota, reg: reg}
}

// cacheWritten waits until the tile cache writes the server made off the
// request path are done.
func (e *env) cacheWritten(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(e.server.cacheWrites) > 0; {
		if time.Now().After(deadline) {
			t.Fatal("tile cache writes still in flight after 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// get sends a GET with the given headers ("Name", "value", ...).
func (e *env) get(t *testing.T, path string, headers ...string) *http.Response {
	t.Helper()
	return e.do(t, http.MethodGet, path, nil, headers...)
}

// adminGet sends a GET to the admin handler.
func (e *env) adminGet(t *testing.T, path string, headers ...string) *http.Response {
	t.Helper()
	return e.adminDo(t, http.MethodGet, path, nil, headers...)
}

// do sends a request to the public handler.
func (e *env) do(t *testing.T, method, path string, body io.Reader, headers ...string) *http.Response {
	t.Helper()
	return send(t, e.srv, method, path, body, headers...)
}

// adminDo sends a request to the admin handler.
func (e *env) adminDo(t *testing.T, method, path string, body io.Reader, headers ...string) *http.Response {
	t.Helper()
	return send(t, e.admin, method, path, body, headers...)
}

func send(t *testing.T, srv *httptest.Server, method, path string, body io.Reader, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" { // the client sends req.Host, not the header
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// used returns the caller's used units per limit, read from GET /v1/quota.
func (e *env) used(t *testing.T, headers ...string) []int64 {
	t.Helper()
	resp := e.get(t, "/v1/quota", headers...)
	var u usage
	decode(t, resp, http.StatusOK, &u)
	out := make([]int64, len(u.Limits))
	for i, l := range u.Limits {
		out[i] = l.Used
	}
	return out
}

// decode checks the status and decodes the JSON body into v.
func decode(t *testing.T, resp *http.Response, status int, v any) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
	}
}

func key(plan string) []string { return []string{"X-API-Key", "key-" + plan} }

func hashOf(secret string) []byte { return keys.Hash(secret) }

// brokenPostGIS is a real PostGIS backend over a schema without tables:
// every query fails in the database.
func brokenPostGIS(t *testing.T) *geofence.PostGIS {
	pool, err := pgxpool.New(context.Background(), spatialtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return geofence.NewPostGIS(pool, time.Second)
}

// usageTotal is the caller's usage history over the last day, summed, as
// GET /v1/usage answers it.
func (e *env) usageTotal(t *testing.T, headers ...string) usageCounts {
	t.Helper()
	var u usageJSON
	decode(t, e.get(t, "/v1/usage", headers...), http.StatusOK, &u)
	return u.Total
}
