package quotahttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/tileapi/tileapi/quota"
)

// A calendar limit's w is the length of the period it is in, in the plan's
// time zone (a day of 23 or 25 hours where the clocks change, a month of
// 28 to 31 days), so that t, the seconds left of it, is never more than w;
// both fields stay Structured Field Values lists, as an independent parser
// reads them. The instants run in order through one gate, so a policy
// cached in one period is not kept into the next, and each through a gate
// of its own; one gate's clock runs a little ahead of the store's across
// the end of a month.
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
				policy := sfvParams(t, w.Header().Values("RateLimit-Policy"), "q", "w")
				state := sfvParams(t, w.Header().Values("RateLimit"), "r", "t")
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

// sfvParams parses values as a Structured Field Values list of items, each
// a string (a policy's name) with the integer parameters keys, and returns
// them by name.
func sfvParams(t *testing.T, values []string, keys ...string) map[string]map[string]int64 {
	t.Helper()
	list, err := httpsfv.UnmarshalList(values)
	if err != nil {
		t.Fatalf("%q is not a Structured Field Values list: %v", values, err)
	}
	out := make(map[string]map[string]int64, len(list))
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		name, isString := item.Value.(string)
		if !ok || !isString {
			t.Fatalf("%q: member %v is not an item named by a string", values, m)
		}
		out[name] = make(map[string]int64, len(keys))
		for _, k := range keys {
			v, _ := item.Params.Get(k)
			n, ok := v.(int64)
			if !ok {
				t.Fatalf("%q: %s of %q is %v, not an integer", values, k, name, v)
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
