package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/alerts/alertstest"
	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
	usagehist "github.com/tileapi/tileapi/internal/usage"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// overagePlans are two plans of 100 units a month alerting at 50, 80 and
// 100% of it: payg's month goes on past its max as metered overage,
// capped's refuses.
const overagePlans = `{"history": "24h", "plans": [
	{"name": "payg", "max_radius_m": 20000, "overage": ["month"], "alerts": {"month": [50, 80, 100]},
	 "limits": [{"name": "burst", "max": 1000, "window": "5s"}, {"name": "month", "max": 100, "period": "month"}]},
	{"name": "capped", "max_radius_m": 20000, "alerts": {"month": [50, 80, 100]},
	 "limits": [{"name": "burst", "max": 1000, "window": "5s"}, {"name": "month", "max": 100, "period": "month"}]}]}`

// Two servers sharing PostgreSQL and Redis, and a key whose month of 100
// is a soft cap: 14 searches of 7 units take it to 98, the 15th crosses
// it (to 105, 5 past it), and 160 requests of a unit hammered concurrently
// at both servers go on past it. Every request is served; those past the
// month say X-Quota-Status: overage with the month's r at 0; the month
// counts every unit; the 100% alert is sent once, by the charge that went
// past it; and the usage history holds the 265 units, 165 of them
// overage. A key on the same plan with a hard month gets 429s past it,
// and no overage.
func TestOverageTwoServers(t *testing.T) {
	pool := spatialtest.Migrated(t)
	ps, err := plans.Parse([]byte(overagePlans))
	if err != nil {
		t.Fatal(err)
	}
	ledgers := []*ledger.Ledger{ledger.New(pool, ledger.Options{}), ledger.New(pool, ledger.Options{})}
	n := 0
	rcv := alertstest.NewReceiver(t, alertSecret, 0)
	a, b := sharedServers(t, redisQuota(t, quotatest.NewClient(t, testenv.RedisURL(t))), 50*time.Millisecond,
		withAlerts(pool, rcv.URL), func(_ *testing.T, c *Config) {
			c.Plans, c.Usage, c.UsageReader = ps, ledgers[n], usagehist.NewPostgres(pool)
			n++
		})
	_, payg := a.createKey(t, "secret", "payg")
	_, capped := a.createKey(t, "secret", "capped")

	const search = "/v1/geofence/within?lng=2.35&lat=48.85&radius=5000" // 7 units
	count := map[string]int{}
	for i := range 15 {
		resp := []*env{a, b}[i%2].get(t, search, "X-API-Key", payg)
		resp.Body.Close()
		count[http.StatusText(resp.StatusCode)+" "+resp.Header.Get(headerStatus)]++
		if i == 14 && !strings.Contains(resp.Header.Get("RateLimit"), `"month";r=0;`) {
			t.Errorf("the search past the month: RateLimit %q, want the month's r=0", resp.Header.Get("RateLimit"))
		}
	}
	for _, ans := range hammerAnswers(t, a, b, payg, 160) {
		count[http.StatusText(ans.code)+" "+ans.quotaStatus]++
		if !strings.Contains(ans.rateLimit, `"month";r=0;`) {
			t.Errorf("an answer past the month: RateLimit %q, want the month's r=0", ans.rateLimit)
		}
	}
	if count["OK charged"] != 14 || count["OK overage"] != 161 || len(count) != 2 {
		t.Errorf("answers %v, want 14 charged and 161 overage, all served", count)
	}
	var u usage
	decode(t, b.get(t, "/v1/quota", "X-API-Key", payg), http.StatusOK, &u)
	if m := u.Limits[1]; m.Name != "month" || m.Used != 265 || m.Remaining != 0 || !m.Overage {
		t.Errorf("the month: %+v, want 265 used, 0 remaining, a soft cap", m)
	}
	for i := range 15 {
		want := http.StatusOK
		if i == 14 {
			want = http.StatusTooManyRequests // 105 of 100
		}
		if resp := a.get(t, search, "X-API-Key", capped); resp.StatusCode != want {
			t.Errorf("a hard month, search %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}
	if n := hammer(t, a, b, capped, 160); n[http.StatusOK] != 2 || n[http.StatusTooManyRequests] != 158 {
		t.Errorf("a hard month: statuses %v, want 2 answered and the rest 429", n)
	}

	// One event per threshold and key, 100% included, though the soft
	// month went on past it.
	rcv.Wait(t, 6, 300*time.Millisecond)
	if byID, bad := rcv.Deliveries(); len(byID) != 6 || bad != 0 {
		t.Errorf("deliveries %v (%d refused), want 3 events a key", byID, bad)
	}

	from := time.Now().UTC().Truncate(time.Hour)
	q := "/v1/usage?" + url.Values{"from": {from.Format(time.RFC3339)}, "to": {from.Add(2 * time.Hour).Format(time.RFC3339)}}.Encode()
	for _, l := range ledgers {
		if err := l.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []struct {
		secret           string
		settled, overage int64
	}{{payg, 265, 165}, {capped, 100, 0}} {
		var got usageJSON
		decode(t, a.get(t, q, "X-API-Key", k.secret), http.StatusOK, &got)
		if got.Total.Settled != k.settled || got.Total.Overage != k.overage || got.Total.Requests != 175 {
			t.Errorf("usage %+v, want 175 requests, %d units settled, %d overage", got.Total, k.settled, k.overage)
		}
	}
}
