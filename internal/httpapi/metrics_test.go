package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// sample returns the value /metrics shows for series (a name and its
// labels as printed, such as `tileapi_quota_near_limit_total{plan="five"}`),
// 0 when it shows none.
func sample(t *testing.T, e *env, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(scrape(t, e), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// failingGeofence is a real in-memory geofence whose Contains fails as a
// database that is down does.
type failingGeofence struct{ *geofence.Memory }

func (failingGeofence) Contains(context.Context, geofence.ContainsQuery) ([]dataset.Fence, error) {
	return nil, geofence.ErrUnavailable
}

// The quota's counters on /metrics move when what they count happens, and
// only then.
func TestQuotaMetrics(t *testing.T) {
	// A decision that leaves under a tenth of the binding limit, admitted
	// or denied, is near the limit: plan five's fifth request leaves 0 of
	// 5, its sixth is denied with 0 left; the fourth, with 1 left, is not.
	t.Run("near limit", func(t *testing.T) {
		const near = `tileapi_quota_near_limit_total{plan="five"}`
		e := newEnv(t)
		for i, want := range []struct {
			status int
			near   float64
		}{{200, 0}, {200, 0}, {200, 0}, {200, 0}, {200, 1}, {429, 2}} {
			if resp := e.get(t, contains, key("five")...); resp.StatusCode != want.status {
				t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, want.status)
			}
			if got := sample(t, e, near); got != want.near {
				t.Errorf("after request %d: %s %v, want %v", i+1, near, got, want.near)
			}
		}
	})

	// Work that fails gives its charge back, and the units are counted
	// under the caller's plan.
	t.Run("units refunded", func(t *testing.T) {
		const refunded = `tileapi_quota_units_refunded_total{plan="std"}`
		// The price, as a server whose database answers charges it.
		priced := newEnv(t).get(t, contains, key("std")...)
		cost, err := strconv.ParseFloat(priced.Header.Get("X-RateLimit-Cost"), 64)
		if priced.StatusCode != http.StatusOK || err != nil || cost < 1 {
			t.Fatalf("with the database up: status %d, cost %q", priced.StatusCode, priced.Header.Get("X-RateLimit-Cost"))
		}
		e := newEnv(t, with(func(c *Config) { c.Geofence = failingGeofence{geofence.NewMemory(memoryDataset(t))} }))
		for i := range 2 {
			resp := e.get(t, contains, key("std")...)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Quota-Status") != "refunded" {
				t.Fatalf("request %d with the database down: status %d, X-Quota-Status %q; want a refunded 503",
					i+1, resp.StatusCode, resp.Header.Get("X-Quota-Status"))
			}
			if got, want := sample(t, e, refunded), float64(i+1)*cost; got != want {
				t.Errorf("after request %d: %s %v, want %v", i+1, refunded, got, want)
			}
		}
		if u := e.used(t, key("std")...); u[0] != 0 {
			t.Errorf("used %v after two refunds, want 0", u)
		}
	})

	// Each charge Redis fails is a store error; none while it answers.
	t.Run("store errors", func(t *testing.T) {
		const errs = "tileapi_quota_store_errors_total"
		redisSrv := quotatest.StartRedisServer(t)
		e := newEnv(t, withRedis("redis://"+redisSrv.Addr), with(func(c *Config) { c.FailClosed = true }))
		if resp := e.get(t, contains, key("std")...); resp.StatusCode != http.StatusOK {
			t.Fatalf("with Redis up: status %d", resp.StatusCode)
		}
		if got := sample(t, e, errs); got != 0 {
			t.Errorf("with Redis up: %s %v, want 0", errs, got)
		}
		redisSrv.Stop()
		for i := range 2 {
			if resp := e.get(t, contains, key("std")...); resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("request %d with Redis down: status %d, want 503", i+1, resp.StatusCode)
			}
			if got := sample(t, e, errs); got != float64(i+1) {
				t.Errorf("after request %d with Redis down: %s %v, want %d", i+1, errs, got, i+1)
			}
		}
	})
}
