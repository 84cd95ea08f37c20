package httpapi

import (
	"context"
	"net/http"
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
// are refused and send nothing more.
func TestAlertsOncePerThresholdTwoServers(t *testing.T) {
	pool := spatialtest.Migrated(t)
	rcv := alertstest.NewReceiver(t, alertSecret, 0)
	q := redisQuota(t, quotatest.NewClient(t, testenv.RedisURL(t)))
	a, b := sharedServers(t, q, 50*time.Millisecond, withAlerts(pool, rcv.URL))
	id, secret := a.createKey(t, "secret", "alerting")

	// 16 clients at once, half on each server, of 10 requests each.
	const clients, each, requests = 16, 10, 160
	var wg sync.WaitGroup
	statuses := make(chan int, requests)
	for i := range clients {
		e := []*env{a, b}[i%2]
		wg.Go(func() {
			for range each {
				resp := e.get(t, "/v1/geofence/contains?lng=6.13&lat=49.61", "X-API-Key", secret)
				resp.Body.Close()
				statuses <- resp.StatusCode
			}
		})
	}
	wg.Wait()
	close(statuses)
	n := map[int]int{}
	for s := range statuses {
		n[s]++
	}
	if n[http.StatusOK] != 100 || n[http.StatusTooManyRequests] != requests-100 {
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
}
