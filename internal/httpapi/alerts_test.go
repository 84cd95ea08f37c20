package httpapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/alerts"
	"github.com/tileapi/tileapi/internal/alerts/alertstest"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// alertPlans add to the test plans one of 100 units a month that alerts at
// 50, 80 and 100% of it.
const alertPlans = `{"history": "24h", "plans": [{"name": "alerting", "max_radius_m": 20000,
	"limits": [{"name": "burst", "max": 1000, "window": "5s"}, {"name": "month", "max": 100, "period": "month"}],
	"alerts": {"month": [50, 80, 100]}}]}`

const alertSecret = "alerts-test-0123456789abcdef0123456789"

// withAlerts gives the server alertPlans, and an outbox of its own on pool
// delivering to url, run until the test ends.
func withAlerts(pool *pgxpool.Pool, url string) option {
	return func(t *testing.T, c *Config) {
		ps, err := plans.Parse([]byte(alertPlans))
		if err != nil {
			t.Fatal(err)
		}
		o, err := alerts.New(pool, alerts.Options{URL: url, Secret: alertSecret, RetryBase: 20 * time.Millisecond, Poll: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); o.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		// Roomier than newEnv's: a store that times out on a busy
		// machine serves unmetered, past the month.
		c.Plans, c.Alerts, c.QuotaTimeout = ps, o, 5*time.Second
	}
}

// Two servers sharing PostgreSQL and Redis, hammered concurrently by one
// key on a plan alerting at 50, 80 and 100% of its month: the receiver
// gets exactly one signed event per threshold, each once, naming the key,
// the period and the count that crossed it; the requests past the month
// are refused and send nothing more. Raised, the month is crossed again in
// the same period, on both servers, and nothing more is sent.
func TestAlertsOncePerThresholdTwoServers(t *testing.T) {
	pool := spatialtest.Migrated(t)
	rcv := alertstest.NewReceiver(t, alertSecret, 0)
	q := redisQuota(t, quotatest.NewClient(t, testenv.RedisURL(t)))
	a, b := sharedServers(t, q, 50*time.Millisecond, withAlerts(pool, rcv.URL))
	id, secret := a.createKey(t, "secret", "alerting")

	// 160 requests of a unit: 100 fit the month.
	if n := hammer(t, a, b, secret, 160); n[http.StatusOK] != 100 || n[http.StatusTooManyRequests] != 60 {
		t.Fatalf("statuses %v, want 100 answered and the rest 429", n)
	}
	rcv.Wait(t, 3, 300*time.Millisecond)
	byID, bad := rcv.Deliveries()
	if bad != 0 || len(byID) != 3 {
		t.Errorf("deliveries %v (%d refused), want 3 events", byID, bad)
	}
	start, end := quota.Month.Bounds(time.Now(), time.UTC)
	identity := KeyIdentity(keys.Key{ID: id})
	for _, pct := range []int{50, 80, 100} {
		eid := alerts.EventID(identity, "month", start, pct)
		e := rcv.Events()[eid]
		if byID[eid] != 1 {
			t.Errorf("%d%%: delivered %d times, want once", pct, byID[eid])
		}
		want := alerts.Event{ID: eid, Type: alerts.TypeThreshold, Created: e.Created, KeyID: id, Identity: identity, Plan: "alerting",
			Limit: "month", PeriodStart: start, PeriodEnd: end, Threshold: pct, Used: int64(pct), Max: 100}
		if !e.PeriodStart.Equal(start) || !e.PeriodEnd.Equal(end) {
			t.Errorf("%d%%: period %s to %s, want %s to %s", pct, e.PeriodStart, e.PeriodEnd, start, end)
		}
		e.PeriodStart, e.PeriodEnd = start, end
		if e != want {
			t.Errorf("%d%%: event %+v, want %+v", pct, e, want)
		}
	}

	// The month raised to 300 by the key's overrides: the count of 100
	// is 33% of it, and the next 200 charges cross 50, 80 and 100% again,
	// on both servers, in the same period. Each threshold was claimed
	// already: nothing more is sent.
	path := fmt.Sprintf("/admin/keys/%d/overrides", id)
	a.adminJSON(t, http.MethodPut, path, `{"limits": [{"name": "month", "max": 300, "period": "month"}]}`).Body.Close()
	for _, e := range []*env{a, b} {
		waitMonthMax(t, e, secret, 300)
	}
	if n := hammer(t, a, b, secret, 200); n[http.StatusOK] != 200 {
		t.Fatalf("statuses %v after the month was raised, want 200 answered", n)
	}
	time.Sleep(300 * time.Millisecond)
	if again, bad := rcv.Deliveries(); !maps.Equal(again, byID) || bad != 0 {
		t.Errorf("deliveries after crossing again %v (%d refused), want still %v", again, bad, byID)
	}
	var rows int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM alert_events`).Scan(&rows); err != nil || rows != 3 {
		t.Errorf("alert_events holds %d rows (%v), want 3", rows, err)
	}
}

// hammer sends n requests of key secret costing one unit each, from 16
// clients at once, half on each server, and returns how many got each
// status.
func hammer(t *testing.T, a, b *env, secret string, n int) map[int]int {
	count := map[int]int{}
	for _, ans := range hammerAnswers(t, a, b, secret, n) {
		count[ans.code]++
	}
	return count
}

// hammered is what hammerAnswers keeps of a response: its status, its
// X-Quota-Status and its RateLimit.
type hammered struct {
	code                   int
	quotaStatus, rateLimit string
}

// hammerAnswers is hammer, returning every answer.
func hammerAnswers(t *testing.T, a, b *env, secret string, n int) []hammered {
	const clients = 16
	var wg sync.WaitGroup
	answers := make(chan hammered, n)
	for i := range clients {
		e := []*env{a, b}[i%2]
		wg.Go(func() {
			for j := i; j < n; j += clients {
				resp := e.get(t, "/v1/geofence/contains?lng=6.13&lat=49.61", "X-API-Key", secret)
				resp.Body.Close()
				answers <- hammered{resp.StatusCode, resp.Header.Get(headerStatus), resp.Header.Get("RateLimit")}
			}
		})
	}
	wg.Wait()
	close(answers)
	var out []hammered
	for ans := range answers {
		out = append(out, ans)
	}
	return out
}

// waitMonthMax polls GET /v1/quota of secret on e until its month's max
// is max: e's key index took in the key's new overrides.
func waitMonthMax(t *testing.T, e *env, secret string, max int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var u usage
		decode(t, e.get(t, "/v1/quota", "X-API-Key", secret), http.StatusOK, &u)
		if i := slices.IndexFunc(u.Limits, func(l limitUsage) bool { return l.Name == "month" }); i >= 0 && u.Limits[i].Max == max {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the month of the key is %+v, want a max of %d", u.Limits, max)
		}
	}
}
