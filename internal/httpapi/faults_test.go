package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// failurePolicies are the two answers to a Redis that does not answer: a
// request served (unmetered), or refused with 503.
var failurePolicies = []struct {
	name       string
	failClosed bool
	status     int
}{{"open", false, http.StatusOK}, {"closed", true, http.StatusServiceUnavailable}}

// faultMargin is what a bound on a request's time allows beyond its
// budget and its own work: for the scheduling of a loaded 2-core machine
// shared with other jobs, where a request over loopback was seen 45 ms
// past its budget; about twice that.
const faultMargin = 100 * time.Millisecond

// A hung Redis (alive, silent) costs a request no more than the quota
// budget, under either failure policy, for every route that uses Redis:
// the quota, the unknown-key guard and the tile cache. Each request waits
// on Redis once on its path (a tile's cache read travels with its
// charge; the cache write and a pending charge are made off it), so it is
// held to one budget, plus its own work (the slowest of the same requests
// with Redis answering) and faultMargin.
func TestHungRedisWithinBudget(t *testing.T) {
	const budget = 50 * time.Millisecond
	for _, tc := range failurePolicies {
		t.Run(tc.name, func(t *testing.T) {
			redisSrv := quotatest.StartRedisServer(t)
			e := newEnv(t, withRedis("redis://"+redisSrv.Addr), with(func(c *Config) {
				c.FailClosed, c.QuotaTimeout = tc.failClosed, budget
			}))
			timed := func(path string, headers ...string) (*http.Response, time.Duration) {
				start := time.Now()
				resp := e.get(t, path, headers...)
				return resp, time.Since(start)
			}
			paths := []string{contains, "/v1/tiles/places/5/16/10.mvt", "/v1/tiles/places/5/16/10.mvt"}
			var work time.Duration
			for _, path := range paths {
				_, took := timed(path, key("free")...)
				work = max(work, took)
			}
			redisSrv.Hang(t)
			for _, path := range paths {
				resp, took := timed(path, key("std")...)
				if resp.StatusCode != tc.status {
					t.Errorf("%s: status %d, want %d", path, resp.StatusCode, tc.status)
				}
				if bound := budget + work + faultMargin; took > bound {
					t.Errorf("%s took %s with Redis hung; want at most %v (budget %s, %v of work)", path, took, bound, budget, work)
				}
			}
			// A key the index lacks goes through the guard, in Redis too.
			var p problem
			resp, took := timed(contains, "X-API-Key", "made-up")
			decode(t, resp, http.StatusUnauthorized, &p)
			if bound := budget + work + faultMargin; took > bound {
				t.Errorf("an unknown key took %s with Redis hung; want at most %v", took, bound)
			}
			// The usage routes say what failed.
			decode(t, e.get(t, "/v1/quota", key("std")...), http.StatusServiceUnavailable, &p)
			admin := []string{"Authorization", "Bearer admin-secret"}
			for _, method := range []string{http.MethodGet, http.MethodDelete} {
				decode(t, e.adminDo(t, method, "/admin/keys/1/usage", nil, admin...), http.StatusServiceUnavailable, &p)
				if p.Code != "quota-unavailable" {
					t.Errorf("%s /admin/keys/1/usage with Redis hung: %+v", method, p)
				}
			}
		})
	}
}

// A request served unmetered under fail-open is in the usage history as
// unmetered units, none charged while Redis is hung, so the operator sees
// what went free.
func TestUnmeteredInUsage(t *testing.T) {
	redisSrv := quotatest.StartRedisServer(t)
	e := newEnv(t, withRedis("redis://"+redisSrv.Addr), with(func(c *Config) { c.QuotaTimeout = 50 * time.Millisecond }))
	redisSrv.Hang(t)
	resp := e.get(t, contains, key("std")...)
	resp.Body.Close()
	// Served unmetered, its charge kept to be made once Redis answers.
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get(headerStatus), statusUnmetered) {
		t.Fatalf("with Redis hung: status %d, %s %q; want 200 unmetered", resp.StatusCode, headerStatus, resp.Header.Get(headerStatus))
	}
	if u := e.usageTotal(t, key("std")...); u.Requests != 1 || u.Unmetered == 0 || u.Charged != 0 {
		t.Errorf("usage of the unmetered request: %+v, want 1 request, its units unmetered, none charged", u)
	}
}

// /readyz pings each dependency within its own second; a hung Redis is
// reported as itself, and keeps the service ready under fail-open, where
// requests are still served.
func TestReadyzWithHungRedis(t *testing.T) {
	for _, tc := range failurePolicies {
		t.Run(tc.name, func(t *testing.T) {
			redisSrv := quotatest.StartRedisServer(t)
			rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			db := spatialtest.Migrated(t)
			e := newEnv(t, with(func(c *Config) {
				c.FailClosed = tc.failClosed
				c.Ready = []Check{
					{Name: "redis", Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, Optional: !tc.failClosed},
					{Name: "database", Ping: db.Ping},
				}
			}))
			redisSrv.Hang(t)
			start := time.Now()
			resp := e.adminGet(t, "/readyz")
			took := time.Since(start)
			var body struct {
				Ready    bool
				Checks   map[string]string
				Degraded []string
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Checks["database"] != "ok" || body.Checks["redis"] == "ok" {
				t.Errorf("checks %v: want the database ok and redis failing", body.Checks)
			}
			if !tc.failClosed && (!body.Ready || !slices.Equal(body.Degraded, []string{"redis"})) {
				t.Errorf("fail-open: %+v, want ready and redis degraded", body)
			}
			// The checks run at once, each within readyTimeout; the
			// database's is a ping.
			if took > readyTimeout+faultMargin {
				t.Errorf("/readyz took %s; want at most %v", took, readyTimeout+faultMargin)
			}
		})
	}
}

// Shadow mode never blocks: what is over the plan is served too, and
// reported as what would have been refused.
func TestShadowOverPlan(t *testing.T) {
	e := newEnv(t, with(func(c *Config) { c.Shadow = true }))
	for _, path := range []string{
		"/v1/geofence/within?lng=2.35&lat=48.85&radius=30000", // above plan five's 20 km
		"/v1/geofence/within?lng=2.35&lat=48.85&radius=20000", // costs more than five units
	} {
		resp := e.get(t, path, key("five")...)
		if resp.StatusCode != 200 || resp.Header.Get(headerStatus) != statusShadowDenied {
			t.Errorf("%s in shadow mode: status %d, %s %q", path, resp.StatusCode, headerStatus, resp.Header.Get(headerStatus))
		}
		plain := newEnv(t)
		var p problem
		decode(t, plain.get(t, path, key("five")...), http.StatusUnprocessableEntity, &p)
	}
	if u := e.used(t, key("five")...); !slices.Equal(u, []int64{0}) {
		t.Errorf("used %v: nothing over the plan is charged", u)
	}
}

// A price the quota refuses as invalid (above quota.MaxUnits: a plan the
// plans file refuses, so only a bug can get here) is a 500, never served
// unmetered as if Redis were down.
func TestInvalidPriceIsNoOutage(t *testing.T) {
	e := newEnv(t)
	p, _ := e.server.cfg.Plans.Lookup("std")
	served := false
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, contains, nil)
	e.server.serve(w, r, caller{identity: "key:invalid", plan: p}, metered{
		route: "contains", cost: quota.MaxUnits + 1,
		work: func(context.Context) (*response, error) { served = true; return jsonResponse("x") },
	})
	if w.Code != http.StatusInternalServerError || served || w.Header().Get(headerStatus) != "" {
		t.Errorf("status %d, served %v, %s %q; want a 500, unserved", w.Code, served, headerStatus, w.Header().Get(headerStatus))
	}
}

// hangingGeofence is a real in-memory geofence whose Contains hangs the
// test's Redis and then fails, as a database would: the refund that
// follows meets a hung Redis.
type hangingGeofence struct {
	*geofence.Memory
	hang func()
}

func (g hangingGeofence) Contains(ctx context.Context, q geofence.ContainsQuery) ([]dataset.Fence, error) {
	g.hang()
	return nil, geofence.ErrUnavailable
}

// A refund that Redis does not answer in time is said to be pending, and
// is made in the background once Redis answers again: the units of work
// never served come back.
func TestRefundRetried(t *testing.T) {
	redisSrv := quotatest.StartRedisServer(t)
	e := newEnv(t, withRedis("redis://"+redisSrv.Addr), with(func(c *Config) {
		c.QuotaTimeout = 100 * time.Millisecond
		c.Geofence = hangingGeofence{Memory: geofence.NewMemory(memoryDataset(t)), hang: func() { redisSrv.Hang(t) }}
	}))
	resp := e.get(t, contains, key("std")...)
	var p problem
	decode(t, resp, http.StatusServiceUnavailable, &p)
	if p.Code != "database-unavailable" || resp.Header.Get(headerStatus) != statusRefundPending {
		t.Fatalf("%+v, %s %q; want database-unavailable, refund-pending", p, headerStatus, resp.Header.Get(headerStatus))
	}
	redisSrv.Resume()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if u := e.used(t, key("std")...); u[0] == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("used %v ten seconds after Redis came back: the refund was not retried", u)
		}
	}
}
