package quotahttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// A request admitted past a soft month is served as overage: said in
// X-Quota-Status, with the month's r at 0 in RateLimit and the minute,
// which can still refuse, in X-RateLimit-*. A settlement gives back the
// units past the month first, and says how many in its event; settled
// back within the month, the request says charged. The minute still
// refuses (429) as before.
func TestSoftLimitOverage(t *testing.T) {
	store, _ := fixedStore()
	plan := mustPlan(t, quota.PerMinute(20), quota.Limit{Name: "month", Max: 10, Period: quota.Month, Soft: true})
	var events []quotahttp.Event
	settle := map[string]int64{} // by X-Settle
	g := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader),
		quotahttp.WithObserver(func(_ *http.Request, e quotahttp.Event) { events = append(events, e) }))
	h := g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Settle"); v != "" {
			if err := quotahttp.Settle(r.Context(), settle[v]); err != nil {
				t.Error(err)
			}
		}
	}))
	settle["to-3"], settle["to-1"] = 3, 1
	steps := []struct {
		cost             int64
		settle           string
		code             int
		status           string
		monthR, xRemains string
		overage          int64 // of the settlement's event: given back past the month
	}{
		{8, "", 200, "charged", "2", "12", 0},
		{4, "to-1", 200, "charged", "1", "11", 2},                   // 12 of 10, settled to 9: its 2 past the month back first
		{4, "", 200, "overage", "0", "7", 0},                        // 13: 3 past it
		{4, "to-3", 200, "overage", "0", "4", 1},                    // 17, settled to 16: 1 of its 4 past it back
		{5, "", http.StatusTooManyRequests, "refused", "0", "4", 0}, // the minute holds 16 of 20
	}
	for i, s := range steps {
		events = events[:0]
		r := request(s.cost)
		if s.settle != "" {
			r.Header.Set("X-Settle", s.settle)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		hd := w.Header()
		if w.Code != s.code || hd.Get(quotahttp.HeaderStatus) != s.status ||
			!strings.Contains(hd.Get("RateLimit"), `"month";r=`+s.monthR+";") || hd.Get("X-RateLimit-Remaining") != s.xRemains {
			t.Errorf("step %d: %d %s, RateLimit %q, X-RateLimit-Remaining %s; want %d %s, month r=%s, %s",
				i, w.Code, hd.Get(quotahttp.HeaderStatus), hd.Get("RateLimit"), hd.Get("X-RateLimit-Remaining"), s.code, s.status, s.monthR, s.xRemains)
		}
		for _, e := range events {
			if e.Kind == quotahttp.EventSettled && e.Overage != s.overage {
				t.Errorf("step %d: settled %d units, %d past the month; want %d", i, e.Units, e.Overage, s.overage)
			}
		}
	}
}

// Requests served while Redis hangs, charged once it answers again, count
// past a soft day as overage too: the units the applied charges say went
// past it add up to what the day counts past its max, and the day still
// admits what follows, as overage.
func TestPendingChargesPastASoftLimit(t *testing.T) {
	plan := mustPlan(t, quota.PerMinute(100), quota.Limit{Name: "day", Max: 6, Period: quota.Day, Soft: true})
	srv := quotatest.StartRedisServer(t)
	rig := newPendingRig(t, srv.Addr, srv.Addr, plan)
	for range 2 {
		if code, status := rig.serve(t, "/", 1); code != 200 || status != "charged" {
			t.Fatalf("before the fault: %d %s", code, status)
		}
	}
	srv.Hang(t)
	for _, cost := range []int64{1, 2, 1, 2, 1, 2} {
		if code, status := rig.serve(t, "/", cost); code != 200 || status != "unmetered-pending" {
			t.Fatalf("Redis hung: %d %s, want 200 unmetered-pending", code, status)
		}
	}
	srv.Resume()
	rig.settled(t)
	var overage int64
	rig.mu.Lock()
	for _, e := range rig.events {
		if e.Kind == quotahttp.EventChargeApplied {
			overage += e.Overage
		}
	}
	rig.mu.Unlock()
	if u := rig.used(t); u[1] != 11 || overage != 11-6 {
		t.Errorf("the day counts %d, the applied charges %d past it; want 11 and 5", u[1], overage)
	}
	if code, status := rig.serve(t, "/", 1); code != 200 || status != "overage" {
		t.Errorf("a request after them: %d %s, want 200 overage", code, status)
	}
}
