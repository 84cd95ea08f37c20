package quotahttp

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// A calendar limit's w is the length of the period it is in, in the plan's
// time zone (a day of 23 or 25 hours where the clocks change, a month of
// 28 to 31 days), so that t, the seconds left of it, is never more than w.
// The instants run in order through one gate, so a policy cached in one
// period is not kept into the next, and each through a gate of its own;
// one gate's clock runs a little ahead of the store's across the end of a
// month. (tileapi's internal/interop reads the headers with a Structured
// Field Values parser, on the wall clock.)
func TestPeriodWindows(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := quota.NewPlan("calendar",
		quota.Limit{Name: "burst", Max: 100, Window: 5 * time.Second}, quota.PerDay(1000), quota.PerMonth(10000))
	if err != nil {
		t.Fatal(err)
	}
	plan.Location = paris
	const day = 24 * 60 * 60
	at := func(month time.Month, d, h, m, s, ns int) time.Time {
		return time.Date(2026, month, d, h, m, s, ns, paris)
	}
	cases := []struct {
		name       string
		at         time.Time
		skew       time.Duration // the gate's clock ahead of the store's
		day, month int64         // the w expected
	}{
		{"February: 28 days", at(2, 14, 9, 30, 0, 0), 0, day, 28 * day},
		{"the first instant of the 23-hour day", at(3, 29, 0, 0, 0, 0), 0, day - 3600, 31*day - 3600},
		{"the 23-hour day, after the clocks go forward", at(3, 29, 12, 0, 0, 0), 0, day - 3600, 31*day - 3600},
		{"the last microsecond of the 23-hour day", at(3, 29, 23, 59, 59, 999_999_000), 0, day - 3600, 31*day - 3600},
		{"April: 30 days", at(4, 30, 18, 0, 0, 0), 0, day, 30 * day},
		{"the 25-hour day, before the clocks go back", at(10, 25, 1, 0, 0, 0), 0, day + 3600, 31*day + 3600},
		{"the 25-hour day, after", at(10, 25, 22, 0, 0, 0), 0, day + 3600, 31*day + 3600},
		{"the last second of November, the gate's clock 3 s ahead", at(11, 30, 23, 59, 59, 0), 3 * time.Second, day, 30 * day},
		{"1 December: a 31-day month", at(12, 1, 0, 0, 0, 0), 0, day, 31 * day},
		{"1 December, noon", at(12, 1, 12, 0, 0, 0), 0, day, 31 * day},
		{"February of a leap year", time.Date(2028, 2, 29, 23, 0, 0, 0, paris), 0, day, 29 * day},
	}
	var now time.Time // the clock of the shared gate's store
	shared := New(quota.NewMemory(func() time.Time { return now }), WithPlan(plan))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now = c.at
			shared.policies.clock = func() time.Time { return c.at.Add(c.skew) }
			own := New(quota.NewMemory(func() time.Time { return c.at }), WithPlan(plan))
			own.policies.clock = shared.policies.clock
			for _, g := range []*Gate{shared, own} {
				w := httptest.NewRecorder()
				g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
				policy := limitParams(t, w.Header().Values("RateLimit-Policy"), "q", "w")
				state := limitParams(t, w.Header().Values("RateLimit"), "r", "t")
				want := map[string]int64{"burst": 5, "day": c.day, "month": c.month}
				for name, wantW := range want {
					if got := policy[name]["w"]; got != wantW {
						t.Errorf("%q: w=%d, want %d (RateLimit-Policy %q)", name, got, wantW, w.Header().Get("RateLimit-Policy"))
					}
					if tt := state[name]["t"]; tt < 1 || tt > policy[name]["w"] {
						t.Errorf("%q: t=%d, w=%d: t must be in [1, w] (RateLimit %q)", name, tt, policy[name]["w"], w.Header().Get("RateLimit"))
					}
				}
				// t counts to the store's end of the period: from midnight at
				// the start of a day (or month) it is the whole of it.
				if c.at.Equal(time.Date(c.at.Year(), c.at.Month(), c.at.Day(), 0, 0, 0, 0, paris)) && state["day"]["t"] != c.day {
					t.Errorf("day: t=%d at midnight, want the whole day, %d", state["day"]["t"], c.day)
				}
			}
		})
	}
}

// limitParams reads a RateLimit-Policy or RateLimit header as the gate
// writes it, members `"name";k=v;...` joined by ", " with exactly the
// integer parameters keys in that order, and returns them by name. That
// the headers are Structured Field Values lists as an independent parser
// reads them is tested in tileapi's internal/interop, as this module
// requires no parser.
func limitParams(t *testing.T, values []string, keys ...string) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	for _, member := range strings.Split(strings.Join(values, ", "), ", ") {
		quoted, params, _ := strings.Cut(member, ";")
		name, err := strconv.Unquote(quoted)
		fields := strings.Split(params, ";")
		if err != nil || len(fields) != len(keys) {
			t.Fatalf("%q: member %q is not a quoted name with %d parameters", values, member, len(keys))
		}
		out[name] = make(map[string]int64, len(keys))
		for i, f := range fields {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if k != keys[i] || err != nil {
				t.Fatalf("%q: parameter %q of %q, want %s=<integer>", values, f, name, keys[i])
			}
			out[name][k] = n
		}
	}
	return out
}

// A window with nothing charged in it limits the caller to its whole
// maximum over its whole length: its effective window t is w, never 0 (a
// client pacing on r/t would divide by nothing).
func TestEffectiveWindowOfAnEmptyWindow(t *testing.T) {
	plan, err := quota.NewPlan("windows", quota.Limit{Name: "burst", Max: 10, Window: 5 * time.Second}, quota.PerMinute(100))
	if err != nil {
		t.Fatal(err)
	}
	g := New(quota.NewMemory(nil), WithPlan(plan))
	w := httptest.NewRecorder()
	g.Usage(func(http.ResponseWriter, *http.Request, quota.Decision) {}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if got, want := w.Header().Get("RateLimit"), `"burst";r=10;t=5, "minute";r=100;t=60`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
}

// A key's plan that shares its customer's: the headers list every limit,
// the key's and the customer's, and X-RateLimit-* describe the one that
// binds, the customer's once it is the tighter; the 429's problem names
// the customer's plan. The customer's day is a day in its own time zone
// (Paris, where 29 March 2026 is 23 hours long), not the key's (UTC).
func TestSharedPlanHeaders(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	customer, err := quota.NewPlan("business", quota.Limit{Name: "customer.minute", Max: 90, Window: time.Minute}, quota.Limit{Name: "customer.day", Max: 1000, Period: quota.Day})
	if err != nil {
		t.Fatal(err)
	}
	customer.Location = paris
	key, err := quota.NewPlan("key", quota.PerMinute(60))
	if err != nil {
		t.Fatal(err)
	}
	key.Shared = []quota.Shared{{Identity: "customer:7", Plan: customer}}
	now := time.Date(2026, 3, 29, 12, 0, 0, 0, paris)
	g := New(quota.NewMemory(func() time.Time { return now }), WithPlan(key), WithCost(func(*http.Request) (int64, error) { return 40, nil }),
		WithIdentity(func(r *http.Request) (string, error) { return quota.Member("customer:7", r.Header.Get("Key")), nil }))
	g.policies.clock = func() time.Time { return now }
	h := g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, c := range []struct {
		key                string
		status             int
		limit, remaining   string
		minute, customerMn int64 // r of each minute
	}{
		{"key:1", http.StatusOK, "60", "20", 20, 50},
		{"key:2", http.StatusOK, "90", "10", 20, 10},
		{"key:3", http.StatusTooManyRequests, "90", "10", 60, 10},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Key", c.key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || w.Header().Get("X-RateLimit-Limit") != c.limit || w.Header().Get("X-RateLimit-Remaining") != c.remaining {
			t.Errorf("%s: %d, X-RateLimit-Limit %q, -Remaining %q; want %d, %s, %s", c.key, w.Code,
				w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"), c.status, c.limit, c.remaining)
		}
		state := limitParams(t, w.Header().Values("RateLimit"), "r", "t")
		if state["minute"]["r"] != c.minute || state["customer.minute"]["r"] != c.customerMn {
			t.Errorf("%s: RateLimit %q, want r=%d for minute and %d for customer.minute", c.key, w.Header().Get("RateLimit"), c.minute, c.customerMn)
		}
		if policy := limitParams(t, w.Header().Values("RateLimit-Policy"), "q", "w"); policy["customer.day"]["w"] != 23*3600 || policy["minute"]["q"] != 60 {
			t.Errorf("%s: RateLimit-Policy %q, want the minute's q=60 and the customer's 23-hour day", c.key, w.Header().Get("RateLimit-Policy"))
		}
		if c.status == http.StatusTooManyRequests && !strings.Contains(w.Body.String(), `plan \"business\"`) {
			t.Errorf("%s: the problem %s does not name the customer's plan", c.key, w.Body.String())
		}
	}
}
