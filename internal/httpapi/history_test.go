package httpapi

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
	usagehist "github.com/tileapi/tileapi/internal/usage"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// clock is a settable clock for the usage history's hours.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// seen is what a client saw of its answered requests: the units they
// cost as settled, and the refusals.
type seen struct {
	requests, settled, refused429, refused422 int64
}

func (s *seen) add(t *testing.T, resp *http.Response) {
	t.Helper()
	resp.Body.Close()
	s.requests++
	switch resp.StatusCode {
	case http.StatusOK:
		h := resp.Header.Get(headerSettledCost)
		if h == "" {
			h = resp.Header.Get("X-RateLimit-Cost")
		}
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			t.Fatalf("a 200 without its cost: %v", resp.Header)
		}
		s.settled += n
	case http.StatusTooManyRequests:
		s.refused429++
	case http.StatusUnprocessableEntity:
		s.refused422++
	default:
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func (s seen) of(c usageCounts) seen {
	return seen{requests: c.Requests, settled: c.Settled, refused429: c.Refused429, refused422: c.Refused422}
}

// Usage across two servers sharing PostgreSQL and Redis, each writing its
// own ledger, adds up to what the clients saw, hour by hour across an hour
// and a day boundary: charges, settlements of empty tiles (rendered, then
// cached), 429s and 422s. By day, before and after the hours are rolled
// up, it is the same; as CSV, parsed back, too.
func TestUsageTwoServers(t *testing.T) {
	pool := spatialtest.Migrated(t)
	clk := &clock{now: time.Date(2026, 3, 10, 22, 30, 0, 0, time.UTC)}
	ledgers := []*ledger.Ledger{ledger.New(pool, ledger.Options{}), ledger.New(pool, ledger.Options{})}
	n := 0
	a, b := sharedServers(t, redisQuota(t, quotatest.NewClient(t, testenv.RedisURL(t))), time.Second,
		func(_ *testing.T, c *Config) {
			c.Usage, c.UsageReader, c.Now = ledgers[n], usagehist.NewPostgres(pool), clk.Now
			n++
		})
	id, secret := a.createKey(t, "secret", "std")
	_, other := a.createKey(t, "secret", "std") // not in the key's usage
	const (
		empty  = "/v1/tiles/counties/5/16/10.mvt" // no county: settled to one unit
		wide   = "/v1/geofence/within?lng=2.35&lat=48.85&radius=20000"
		beyond = "/v1/geofence/within?lng=2.35&lat=48.85&radius=30000" // over std's radius: 422
	)
	hours := []time.Time{clk.now, clk.now.Add(time.Hour), clk.now.Add(2 * time.Hour)} // 22:30, 23:30, 00:30 the next day
	var perHour [3]seen
	for i, at := range hours {
		clk.set(at)
		// A burst of 100 units in 5 s: the wide query (100 units) after the
		// tiles is refused 429.
		for _, e := range []*env{a, b} {
			for _, path := range []string{empty, contains, wide, beyond} {
				perHour[i].add(t, e.get(t, path, "X-API-Key", secret))
			}
			e.cacheWritten(t)
			e.get(t, contains, "X-API-Key", other).Body.Close()
		}
		time.Sleep(5 * time.Second) // the burst window empties
	}
	var total seen
	for _, s := range perHour {
		total.requests, total.settled = total.requests+s.requests, total.settled+s.settled
		total.refused429, total.refused422 = total.refused429+s.refused429, total.refused422+s.refused422
	}
	if total.refused429 == 0 || total.refused422 == 0 {
		t.Fatalf("the clients saw %+v: no 429 or no 422 to count", total)
	}

	from, to := hours[0].Truncate(time.Hour).Format(time.RFC3339), hours[2].Add(time.Hour).Format(time.RFC3339)
	byHour := "/v1/usage?" + url.Values{"from": {from}, "to": {to}}.Encode()
	var u usageJSON
	// A cached tile's charge is lowered off the client's path: flush until
	// the history holds it, or the deadline.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, l := range ledgers {
			if err := l.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		u = usageJSON{}
		decode(t, b.get(t, byHour, "X-API-Key", secret), http.StatusOK, &u)
		if (seen{}).of(u.Total) == total || time.Now().After(deadline) {
			break
		}
	}
	if got := (seen{}).of(u.Total); got != total {
		t.Errorf("the usage API's total is %+v, the clients saw %+v", got, total)
	}
	if len(u.Rows) != 3 {
		t.Fatalf("by hour: %d rows, want 3: %+v", len(u.Rows), u.Rows)
	}
	for i, r := range u.Rows {
		if !r.Start.Equal(hours[i].Truncate(time.Hour)) || r.KeyID != id || (seen{}).of(r.usageCounts) != perHour[i] {
			t.Errorf("hour %d: %+v, want start %s, key %d, %+v", i, r, hours[i].Truncate(time.Hour), id, perHour[i])
		}
	}

	// By day: the 10th holds two hours, the 11th one, before and after the
	// hours are rolled up.
	byDay := "/admin/usage?" + url.Values{"key": {strconv.FormatInt(id, 10)}, "from": {"2026-03-10T00:00:00Z"}, "to": {"2026-03-12T00:00:00Z"}, "by": {"day"}, "group": {"layer"}}.Encode()
	days := func() map[string]seen {
		t.Helper()
		resp := a.adminGet(t, byDay, "Authorization", "Bearer admin-secret", "Accept", "text/csv")
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
			t.Fatalf("CSV: status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		recs, err := csv.NewReader(resp.Body).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(recs[0]) != fmt.Sprint(usageCSVHeader) {
			t.Fatalf("CSV header %v", recs[0])
		}
		out := make(map[string]seen)
		for _, rec := range recs[1:] {
			f := func(i int) int64 {
				n, err := strconv.ParseInt(rec[i], 10, 64)
				if err != nil {
					t.Fatalf("CSV field %d of %v: %v", i, rec, err)
				}
				return n
			}
			if f(2) != id {
				t.Errorf("CSV row of key %s, want %d", rec[2], id)
			}
			s := out[rec[0]]
			s.requests, s.settled, s.refused429, s.refused422 = s.requests+f(6), s.settled+f(9), s.refused429+f(12), s.refused422+f(13)
			out[rec[0]] = s
		}
		return out
	}
	var tenth seen
	for _, s := range perHour[:2] {
		tenth.requests, tenth.settled = tenth.requests+s.requests, tenth.settled+s.settled
		tenth.refused429, tenth.refused422 = tenth.refused429+s.refused429, tenth.refused422+s.refused422
	}
	want := map[string]seen{"2026-03-10T00:00:00Z": tenth, "2026-03-11T00:00:00Z": perHour[2]}
	if got := days(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("by day before the rollup: %v, want %v", got, want)
	}
	// The 10th, whole: now 00:30 on the 11th, a retention of 10 minutes.
	if _, err := usagehist.NewPostgres(pool).Rollup(context.Background(), hours[2], 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := days(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("by day after the rollup: %v, want %v", got, want)
	}
	u = usageJSON{}
	decode(t, b.get(t, byHour, "X-API-Key", secret), http.StatusOK, &u)
	if len(u.Rows) != 1 {
		t.Errorf("by hour after the rollup of the 10th: %+v, want the hour of the 11th", u.Rows)
	}
}
