package httpapi

import (
	"net"
	"net/http"
	"sync"
	"testing"
)

// Every metered response says how it was metered in X-Quota-Status,
// refusals included: a 429 of the quota or of the in-flight slots, a 422
// over the plan, a 503 failing closed are "refused" (not served, nothing
// charged). An answer made before the caller is metered (a bad parameter,
// a key unknown or revoked) carries none: the quota never saw it.
func TestQuotaStatusOnRefusals(t *testing.T) {
	const within = "/v1/geofence/within?lng=2.35&lat=48.85&radius="
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			slow := newSlowGeofence(t)
			e := newEnv(t, append(mode.opts(t), with(func(c *Config) { c.Geofence = slow }))...)
			k, err := e.keys.Add(t.Context(), "revoked", "free", "key-revoked")
			if err == nil {
				_, err = e.keys.Revoke(t.Context(), k.ID)
			}
			if err != nil {
				t.Fatal(err)
			}
			slow.end() // contains answers at once, until the in-flight case

			// The "five" plan: 5 units in 10 s; a search of 5 km costs 7.
			expectStatus(t, e.get(t, within+"5000", key("five")...), http.StatusUnprocessableEntity, "refused") // cost-exceeds-plan
			for range 5 {
				expectStatus(t, e.get(t, contains, key("five")...), http.StatusOK, "charged")
			}
			expectStatus(t, e.get(t, contains, key("five")...), http.StatusTooManyRequests, "refused")          // quota-exceeded
			expectStatus(t, e.get(t, within+"30000", key("std")...), http.StatusUnprocessableEntity, "refused") // radius-exceeds-plan
			expectStatus(t, e.get(t, within+"x", key("std")...), http.StatusBadRequest, "")
			expectStatus(t, e.get(t, contains, "X-API-Key", "key-nobody"), http.StatusUnauthorized, "")
			expectStatus(t, e.get(t, contains, key("revoked")...), http.StatusForbidden, "")

			// The "two" plan: two requests in flight at once.
			held := newSlowGeofence(t)
			e = newEnv(t, append(mode.opts(t), with(func(c *Config) { c.Geofence = held }))...)
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait)
			t.Cleanup(held.end)
			for range 2 {
				wg.Go(func() {
					req, _ := http.NewRequest(http.MethodGet, e.srv.URL+contains, nil)
					req.Header.Set("X-API-Key", "key-two")
					if resp, err := e.srv.Client().Do(req); err == nil {
						resp.Body.Close()
					}
				})
			}
			held.waitInFlight(t, 2)
			expectStatus(t, e.get(t, "/v1/tiles", key("two")...), http.StatusTooManyRequests, "refused") // concurrency-exceeded
		})
	}

	// Failing closed with Redis gone: the gate's charge fails ("std" has no
	// in-flight limit), and so does the in-flight slot ("two" has one).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	e := newEnv(t, withRedis("redis://"+gone), with(func(c *Config) { c.FailClosed = true }))
	expectStatus(t, e.get(t, "/v1/tiles", key("std")...), http.StatusServiceUnavailable, "refused")
	expectStatus(t, e.get(t, "/v1/tiles", key("two")...), http.StatusServiceUnavailable, "refused")
}

// expectStatus checks a response's status and X-Quota-Status ("" for none).
func expectStatus(t *testing.T, resp *http.Response, code int, quotaStatus string) {
	t.Helper()
	if got := resp.Header.Values(headerStatus); resp.StatusCode != code || len(got) > 1 || resp.Header.Get(headerStatus) != quotaStatus {
		t.Errorf("%s: %d, X-Quota-Status %q; want %d, %q", resp.Request.URL.RequestURI(), resp.StatusCode, got, code, quotaStatus)
	}
}
