package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// Fail-open never forgets: what a key is served while Redis cannot charge
// it (dead, or out of memory and refusing writes, as a Redis at maxmemory
// with noeviction does) is charged once Redis answers again, every unit,
// as an overdraft past the plan's limits, and counted in the metrics.
func TestServedUnmeteredIsChargedLater(t *testing.T) {
	for _, tc := range []struct {
		name     string
		served   int // requests while Redis fails
		fail     func(t *testing.T, srv *quotatest.RedisServer, admin *redis.Client)
		answer   func(t *testing.T, srv *quotatest.RedisServer, admin *redis.Client)
		keptPrev bool // whether Redis keeps what was charged before
	}{
		{"dead", 10,
			func(_ *testing.T, srv *quotatest.RedisServer, _ *redis.Client) { srv.Stop() },
			func(t *testing.T, srv *quotatest.RedisServer, _ *redis.Client) {
				if err := srv.Start(); err != nil {
					t.Fatal(err)
				}
			}, false},
		// The case: a paying key's 150 requests at maxmemory were
		// all served unmetered and forgotten.
		{"maxmemory", 150,
			func(t *testing.T, _ *quotatest.RedisServer, admin *redis.Client) {
				configSet(t, admin, "maxmemory", "1")
			},
			func(t *testing.T, _ *quotatest.RedisServer, admin *redis.Client) {
				configSet(t, admin, "maxmemory", "0")
			},
			true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := quotatest.StartRedisServer(t, "--maxmemory-policy", "noeviction")
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { admin.Close() })
			e := newEnv(t, withRedis("redis://"+srv.Addr))
			resp := e.get(t, contains, key("std")...)
			price, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
			if err != nil || resp.Header.Get(headerStatus) != statusCharged {
				t.Fatalf("before: %s %q, X-RateLimit-Cost %q", headerStatus, resp.Header.Get(headerStatus), resp.Header.Get("X-RateLimit-Cost"))
			}

			tc.fail(t, srv, admin)
			for i := range tc.served {
				resp := e.get(t, contains, key("std")...)
				if resp.StatusCode != 200 || resp.Header.Get(headerStatus) != statusPending {
					t.Fatalf("request %d with Redis failing: %d %s %q, want 200 %s", i, resp.StatusCode, headerStatus, resp.Header.Get(headerStatus), statusPending)
				}
				if owed := resp.Header.Get("X-RateLimit-Cost"); owed != strconv.FormatInt(price, 10) {
					t.Fatalf("request %d with Redis failing owes X-RateLimit-Cost %q, want %d", i, owed, price)
				}
			}
			tc.answer(t, srv, admin)
			applied := `tileapi_quota_pending_charges_total{outcome="applied"} ` + strconv.Itoa(tc.served)
			for deadline := time.Now().Add(20 * time.Second); !strings.Contains(scrape(t, e), applied); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("not %s twenty seconds after Redis answered", applied)
				}
			}
			want := price * int64(tc.served)
			if tc.keptPrev {
				want += price
			}
			if u := e.used(t, key("std")...); u[0] != want || u[1] != want {
				t.Errorf("used %v once Redis answers, want %d in both limits (%d requests of %d units served unmetered)", u, want, tc.served, price)
			}
			m := scrape(t, e)
			for _, line := range []string{
				`tileapi_quota_pending_charges_total{outcome="queued"} ` + strconv.Itoa(tc.served),
				`tileapi_quota_units_charged_total{plan="std"} ` + strconv.FormatInt(price*int64(1+tc.served), 10),
			} {
				if !strings.Contains(m, line) {
					t.Errorf("metrics lack %s", line)
				}
			}
			if strings.Contains(m, `outcome="dropped"`) {
				t.Error("a pending charge was dropped")
			}
			if want > 100 { // past the plan's burst of 100: an overdraft
				var p problem
				decode(t, e.get(t, contains, key("std")...), http.StatusTooManyRequests, &p)
			}
		})
	}
}

// within is a radius query that the plan "work" prices at more than its
// work costs.
const within = "/v1/geofence/within?lng=2.35&lat=48.85&radius=20000"

func configSet(t *testing.T, c *redis.Client, name, value string) {
	t.Helper()
	if err := c.ConfigSet(context.Background(), name, value).Err(); err != nil {
		t.Fatal(err)
	}
}

// A request served unmetered on a plan that prices work owes what its work
// cost, as a charged one would be settled at, not its price up front.
func TestPendingChargeSettled(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	e := newEnv(t, withRedis("redis://"+srv.Addr))
	resp := e.get(t, within, key("work")...)
	settled := resp.Header.Get(headerSettledCost)
	if resp.Header.Get(headerStatus) != statusCharged || settled == "" || settled == resp.Header.Get("X-RateLimit-Cost") {
		t.Fatalf("before: %s %q, cost %q settled at %q: want charged, and settled lower", headerStatus,
			resp.Header.Get(headerStatus), resp.Header.Get("X-RateLimit-Cost"), settled)
	}
	srv.Stop()
	resp = e.get(t, within, key("work")...)
	if resp.Header.Get(headerStatus) != statusPending || resp.Header.Get(headerSettledCost) != settled {
		t.Fatalf("Redis down: %s %q, settled at %q; want %s, settled at %s", headerStatus,
			resp.Header.Get(headerStatus), resp.Header.Get(headerSettledCost), statusPending, settled)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	applied := `tileapi_quota_pending_charges_total{outcome="applied"} 1`
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(scrape(t, e), applied); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s twenty seconds after Redis came back", applied)
		}
	}
	if u := e.used(t, key("work")...); strconv.FormatInt(u[0], 10) != settled {
		t.Errorf("used %v once Redis is back (the restart lost what came before), want %s, the settled cost", u, settled)
	}
}
