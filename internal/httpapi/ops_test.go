package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// When Redis dies mid-test, fail-open serves unmetered (and says its
// charge is pending) and fail-closed answers 503 with Retry-After; both
// recover by themselves when Redis is back.
func TestQuotaFailurePolicy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failClosed bool
		down       int // the status while Redis is down
	}{{"open", false, http.StatusOK}, {"closed", true, http.StatusServiceUnavailable}} {
		t.Run(tc.name, func(t *testing.T) {
			redisSrv := quotatest.StartRedisServer(t)
			e := newEnv(t, withRedis("redis://"+redisSrv.Addr), with(func(c *Config) { c.FailClosed = tc.failClosed }))
			if resp := e.get(t, contains, key("std")...); resp.StatusCode != 200 || resp.Header.Get("X-Quota-Status") != "charged" {
				t.Fatalf("before: status %d, quota %q", resp.StatusCode, resp.Header.Get("X-Quota-Status"))
			}
			redisSrv.Stop()
			resp := e.get(t, contains, key("std")...)
			if resp.StatusCode != tc.down {
				t.Fatalf("Redis down: status %d, want %d", resp.StatusCode, tc.down)
			}
			if tc.failClosed {
				var p problem
				decode(t, resp, http.StatusServiceUnavailable, &p)
				if p.Code != "quota-unavailable" || resp.Header.Get("Retry-After") != "1" {
					t.Errorf("fail-closed: %+v, Retry-After %q", p, resp.Header.Get("Retry-After"))
				}
			} else if got := resp.Header.Get("X-Quota-Status"); got != "unmetered-pending" {
				t.Errorf("fail-open: X-Quota-Status %q, want unmetered-pending", got)
			}
			if err := redisSrv.Start(); err != nil {
				t.Fatal(err)
			}
			resp = e.get(t, contains, key("std")...)
			if resp.StatusCode != 200 || resp.Header.Get("X-Quota-Status") != "charged" {
				t.Errorf("after Redis is back: status %d, quota %q", resp.StatusCode, resp.Header.Get("X-Quota-Status"))
			}
			if tc.failClosed {
				return
			}
			metrics := scrape(t, e)
			if !strings.Contains(metrics, "tileapi_quota_fail_open_total 1") {
				t.Error("fail-open not counted")
			}
		})
	}
}

// Shadow mode reports what would be denied but never blocks.
func TestShadowMode(t *testing.T) {
	e := newEnv(t, with(func(c *Config) { c.Shadow = true }))
	for i := range 8 {
		resp := e.get(t, contains, key("five")...)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d in shadow mode", i, resp.StatusCode)
		}
		want := "charged"
		if i >= 5 {
			want = "shadow-denied"
		}
		if got := resp.Header.Get("X-Quota-Status"); got != want {
			t.Errorf("request %d: X-Quota-Status %q, want %q", i, got, want)
		}
	}
	if u := e.used(t, key("five")...); !slices.Equal(u, []int64{5}) {
		t.Errorf("used %v, want [5]: shadow denials must not be charged", u)
	}
}

func TestAdminAPI(t *testing.T) {
	e := newEnv(t)
	admin := []string{"Authorization", "Bearer admin-secret"}
	if resp := e.adminGet(t, "/admin/keys"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: status %d", resp.StatusCode)
	}
	if resp := e.adminGet(t, "/admin/keys", "Authorization", "Bearer admin-secreT"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: status %d", resp.StatusCode)
	}

	var created struct {
		keyJSON
		Secret string `json:"secret"`
	}
	decode(t, e.adminDo(t, http.MethodPost, "/admin/keys", strings.NewReader(`{"name":"acme","plan":"five"}`), admin...), http.StatusCreated, &created)
	if created.Secret == "" || created.Plan != "five" || !strings.HasPrefix(created.Secret, created.Prefix) {
		t.Fatalf("created %+v", created)
	}
	var p problem
	decode(t, e.adminDo(t, http.MethodPost, "/admin/keys", strings.NewReader(`{"name":"x","plan":"gold"}`), admin...), http.StatusBadRequest, &p)
	if p.Field != "plan" {
		t.Errorf("unknown plan: %+v", p)
	}

	// The new key works and is metered under its plan.
	for range 2 {
		e.get(t, contains, "X-API-Key", created.Secret)
	}
	path := "/admin/keys/" + itoa(created.ID)
	var u usage
	decode(t, e.adminGet(t, path+"/usage", admin...), http.StatusOK, &u)
	if u.Plan != "five" || u.Limits[0].Used != 2 {
		t.Errorf("usage %+v, want plan five with 2 used", u)
	}
	decode(t, e.adminDo(t, http.MethodPut, path+"/plan", strings.NewReader(`{"plan":"std"}`), admin...), http.StatusOK, nil)
	decode(t, e.adminDo(t, http.MethodDelete, path+"/usage", nil, admin...), http.StatusNoContent, nil)
	decode(t, e.adminGet(t, path+"/usage", admin...), http.StatusOK, &u)
	if u.Plan != "std" || u.Limits[0].Used != 0 {
		t.Errorf("after re-plan and reset: %+v", u)
	}

	var list struct{ Keys []keyJSON }
	resp := e.adminGet(t, "/admin/keys", admin...)
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), created.Secret) {
		t.Error("the key list shows a secret")
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Keys) != len(testKeyPlans)+1 {
		t.Errorf("list: %d keys, %v", len(list.Keys), err)
	}

	var revoked keyJSON
	decode(t, e.adminDo(t, http.MethodDelete, path, nil, admin...), http.StatusOK, &revoked)
	if revoked.RevokedAt == nil {
		t.Errorf("revoked key %+v", revoked)
	}
	// This server applies its own change at once.
	decode(t, e.get(t, contains, "X-API-Key", created.Secret), http.StatusForbidden, &p)
	decode(t, e.adminGet(t, "/admin/keys/999999", admin...), http.StatusNotFound, &p)
	decode(t, e.adminGet(t, "/admin/keys/abc", admin...), http.StatusBadRequest, &p)

	disabled := newEnv(t, with(func(c *Config) { c.AdminToken = "" }))
	if resp := disabled.get(t, "/admin/keys", "Authorization", "Bearer "); resp.StatusCode != http.StatusNotFound {
		t.Errorf("admin API with no token configured: status %d, want 404", resp.StatusCode)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	for range 6 {
		e.get(t, contains, key("five")...)
	}
	e.get(t, "/v1/tiles/places/3/4/2.mvt", key("pro")...)
	m := scrape(t, e)
	for _, want := range []string{
		`tileapi_quota_decisions_total{outcome="allowed",plan="five"} 5`,
		`tileapi_quota_decisions_total{outcome="denied",plan="five"} 1`,
		`tileapi_quota_units_charged_total{plan="five"} 5`,
		`tileapi_http_requests_total{route="/v1/geofence/contains",status="429"} 1`,
		`tileapi_tile_cache_total{result="MISS"} 1`,
		`tileapi_quota_decision_seconds_count 7`,
		`tileapi_query_duration_seconds_count{route="contains"} 5`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// The OpenAPI document describes every route either router serves.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	for name, h := range map[string]http.Handler{"public": e.server.handler, "admin": e.server.AdminHandler()} {
		router, ok := h.(chi.Routes)
		if !ok {
			t.Fatalf("the %s handler is a %T, not a chi router", name, h)
		}
		err := chi.Walk(router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			route = strings.TrimSuffix(route, "/")
			if route == "" || route == "/*" || strings.HasPrefix(route, "/assets") {
				return nil // the demo page
			}
			if _, ok := doc.Paths[route][strings.ToLower(method)]; !ok {
				t.Errorf("%s %s (%s) is not in openapi.json", method, route, name)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// scrape returns the text of /metrics.
func scrape(t *testing.T, e *env) string {
	t.Helper()
	resp := e.get(t, "/metrics")
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
