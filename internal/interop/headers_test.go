package interop

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// The gate's RateLimit-Policy and RateLimit are Structured Field Values
// lists, as an independent parser reads them: each member an item named by
// a string with integer parameters, q and w in the policy, r and t in the
// state, for sliding windows, calendar periods in a plan's time zone, many
// limits with long names, and a refusal. A calendar limit's w is the length
// of the period it is in (today's length in Paris, this month's), so t is
// in [1, w]. The gate runs on the wall clock, as a consumer's does;
// quotahttp's TestPeriodWindows sets the clock to the instants where the
// periods are odd (the days the clocks change, February of a leap year).
func TestHeadersParse(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	calendar := mustPlan(t, quota.Limit{Name: "burst", Max: 100, Window: 5 * time.Second}, quota.PerDay(1000), quota.PerMonth(10000))
	calendar.Location = paris
	cases := []struct {
		name     string
		plan     quota.Plan
		requests int   // the last one's headers are read
		status   int   // the last one's status
		remain   int64 // r of every limit after the last; -1 for its maximum less the one unit charged
	}{
		{"a sliding window", mustPlan(t, quota.PerMinute(60)), 1, http.StatusOK, -1},
		{"calendar periods in Paris", calendar, 1, http.StatusOK, -1},
		{"many limits with long names", mustPlan(t,
			quota.Limit{Name: "a-rather-long-burst-limit-name", Max: 50, Window: 5 * time.Second},
			quota.Limit{Name: "a-rather-long-minute-limit-name", Max: 300, Window: time.Minute},
			quota.Limit{Name: "a-rather-long-hour-limit-name", Max: 9000, Window: time.Hour},
			quota.Limit{Name: "a-rather-long-daily-limit-name", Max: 100_000, Period: quota.Day},
		), 1, http.StatusOK, -1},
		{"a refusal", mustPlan(t, quota.Limit{Name: "burst", Max: 2, Window: 10 * time.Second}), 3, http.StatusTooManyRequests, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Read again if a day ended while the gate answered: the
			// lengths expected are of the day the answer was made in.
			for try := 0; ; try++ {
				before := time.Now()
				h := quotahttp.Limit(quota.NewMemory(nil), c.plan)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				var w *httptest.ResponseRecorder
				for range c.requests {
					w = httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
				}
				if !sameDay(before, time.Now(), c.plan.Location) && try == 0 {
					continue
				}
				if w.Code != c.status {
					t.Fatalf("status %d, want %d", w.Code, c.status)
				}
				policy := sfvParams(t, w.Header().Values("RateLimit-Policy"), "q", "w")
				state := sfvParams(t, w.Header().Values("RateLimit"), "r", "t")
				if len(policy) != len(c.plan.Limits) || len(state) != len(c.plan.Limits) {
					t.Fatalf("%d limits in RateLimit-Policy %q and %d in RateLimit %q, want %d",
						len(policy), w.Header().Values("RateLimit-Policy"), len(state), w.Header().Values("RateLimit"), len(c.plan.Limits))
				}
				for _, l := range c.plan.Limits {
					p, s := policy[l.Name], state[l.Name]
					if p == nil || s == nil {
						t.Fatalf("%q: missing from RateLimit-Policy %v or RateLimit %v", l.Name, policy, state)
					}
					if p["q"] != l.Max {
						t.Errorf("%q: q=%d, want %d", l.Name, p["q"], l.Max)
					}
					if want := window(l, before, c.plan.Location); p["w"] != want {
						t.Errorf("%q: w=%d, want %d", l.Name, p["w"], want)
					}
					if s["t"] < 1 || s["t"] > p["w"] {
						t.Errorf("%q: t=%d, w=%d: t must be in [1, w]", l.Name, s["t"], p["w"])
					}
					want := c.remain
					if want < 0 {
						want = l.Max - 1
					}
					if s["r"] != want {
						t.Errorf("%q: r=%d, want %d", l.Name, s["r"], want)
					}
				}
				return
			}
		})
	}
}

// window is the w of l at instant at: a sliding window's length, or the
// length of the calendar day or month at is in, in loc, in seconds.
func window(l quota.Limit, at time.Time, loc *time.Location) int64 {
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := at.In(loc).Date()
	switch l.Period {
	case quota.Day:
		return time.Date(y, m, d+1, 0, 0, 0, 0, loc).Unix() - time.Date(y, m, d, 0, 0, 0, 0, loc).Unix()
	case quota.Month:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, loc).Unix() - time.Date(y, m, 1, 0, 0, 0, 0, loc).Unix()
	}
	return int64(l.Window / time.Second)
}

func sameDay(a, b time.Time, loc *time.Location) bool {
	if loc == nil {
		loc = time.UTC
	}
	ay, am, ad := a.In(loc).Date()
	by, bm, bd := b.In(loc).Date()
	return ay == by && am == bm && ad == bd
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
