package quotahttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/quotatest/faultproxy"
)

// pendingRig is a gate failing open over a real Redis at addr, with what a
// test of its pending charges reads: the events it observed, and the
// store's usage read by a client of its own.
type pendingRig struct {
	gate    *quotahttp.Gate
	handler http.Handler
	plan    quota.Plan
	direct  *quota.Redis // reads the same keys, straight from Redis

	mu     sync.Mutex
	events []quotahttp.Event
}

func newPendingRig(t *testing.T, addr, directAddr string, plan quota.Plan, opts ...quotahttp.Option) *pendingRig {
	t.Helper()
	client := quotatest.NewClient(t, "redis://"+addr)
	direct := redis.NewClient(&redis.Options{Addr: directAddr, MaxRetries: -1})
	t.Cleanup(func() { direct.Close() })
	prefix := fmt.Sprintf("pendingtest:%d:", time.Now().UnixNano())
	rig := &pendingRig{plan: plan, direct: quota.NewRedis(direct, quota.WithPrefix(prefix))}
	opts = append([]quotahttp.Option{quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader),
		quotahttp.WithTimeout(100 * time.Millisecond),
		quotahttp.WithObserver(func(_ *http.Request, e quotahttp.Event) {
			rig.mu.Lock()
			defer rig.mu.Unlock()
			rig.events = append(rig.events, e)
		})}, opts...)
	rig.gate = quotahttp.New(quota.NewRedis(client, quota.WithPrefix(prefix)), opts...)
	rig.handler = rig.gate.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/settle":
			if err := quotahttp.Settle(r.Context(), 1); err != nil {
				t.Errorf("Settle: %v", err)
			}
		}
	}))
	return rig
}

// serve sends a request of cost to path and returns its X-Quota-Status.
// A response whose charge is pending says what it owes in
// X-RateLimit-Cost (0 once forgiven), as a charged one says its price.
func (rig *pendingRig) serve(t *testing.T, path string, cost int64) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	rig.handler.ServeHTTP(w, requestTo(path, cost))
	status, owed := w.Header().Get(quotahttp.HeaderStatus), w.Header().Get("X-RateLimit-Cost")
	switch {
	case status == "unmetered-pending" && owed != strconv.FormatInt(cost, 10):
		t.Errorf("%s: X-RateLimit-Cost %q, want %d", status, owed, cost)
	case status == "unmetered" && owed != "" && owed != "0":
		t.Errorf("%s: X-RateLimit-Cost %q, want none or 0", status, owed)
	}
	return w.Code, status
}

// count is the number of events of kind observed.
func (rig *pendingRig) count(kind quotahttp.EventKind) int {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	n := 0
	for _, e := range rig.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// settled waits until the gate owes the store nothing.
func (rig *pendingRig) settled(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); rig.gate.Pending() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gate still owes %d after 20s", rig.gate.Pending())
		}
	}
}

// used is the identity's usage in each limit, as Redis holds it.
func (rig *pendingRig) used(t *testing.T) []int64 {
	t.Helper()
	d, err := rig.direct.Peek(context.Background(), "192.0.2.7", rig.plan)
	if err != nil {
		t.Fatal(err)
	}
	u := make([]int64, len(d.Limits))
	for i, l := range d.Limits {
		u[i] = l.Used
	}
	return u
}

// Requests served while Redis is dead or hung are charged once it answers
// again, each once, in every window and period, past their maxima: the
// overdraft then refuses what follows.
func TestPendingChargesMadeWhenRedisIsBack(t *testing.T) {
	plan := mustPlan(t, quota.Limit{Name: "minute", Max: 5, Window: time.Minute}, quota.Limit{Name: "day", Max: 6, Period: quota.Day})
	for _, tc := range []struct {
		name         string
		fail, answer func(t *testing.T, srv *quotatest.RedisServer)
		kept         int64 // of the units charged before the fault
	}{
		// The charges sent to a hung Redis run once it resumes, after
		// their deadline: none is made, so none is counted twice.
		{"hung", func(t *testing.T, srv *quotatest.RedisServer) { srv.Hang(t) }, func(_ *testing.T, srv *quotatest.RedisServer) { srv.Resume() }, 2},
		// A restart without persistence loses what was charged before.
		{"dead", func(_ *testing.T, srv *quotatest.RedisServer) { srv.Stop() }, func(t *testing.T, srv *quotatest.RedisServer) {
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := quotatest.StartRedisServer(t)
			rig := newPendingRig(t, srv.Addr, srv.Addr, plan)
			for range 2 {
				if code, status := rig.serve(t, "/", 1); code != 200 || status != "charged" {
					t.Fatalf("before the fault: %d %s", code, status)
				}
			}
			tc.fail(t, srv)
			var served int64
			for _, cost := range []int64{1, 2, 1, 2, 1, 2} {
				if code, status := rig.serve(t, "/", cost); code != 200 || status != "unmetered-pending" {
					t.Fatalf("Redis %s: %d %s, want 200 unmetered-pending", tc.name, code, status)
				}
				served += cost
			}
			if n := rig.gate.Pending(); n != 6 {
				t.Errorf("the gate owes %d charges, want 6", n)
			}
			tc.answer(t, srv)
			rig.settled(t)
			want := tc.kept + served
			if u := rig.used(t); u[0] != want || u[1] != want {
				t.Errorf("used %v once Redis answers, want %d in both limits: %d charged before, %d served unmetered", u, want, tc.kept, served)
			}
			if n := rig.count(quotahttp.EventChargeApplied); n != 6 {
				t.Errorf("%d pending charges applied, want 6", n)
			}
			if code, _ := rig.serve(t, "/", 1); code != http.StatusTooManyRequests {
				t.Errorf("a request after the overdraft: %d, want 429", code)
			}
		})
	}
}

// A pending charge whose try reached Redis and was made, but whose answer
// was lost, is not counted again when it is retried.
func TestPendingChargeLostReply(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	plan := mustPlan(t, quota.PerMinute(100))
	rig := newPendingRig(t, proxy.Addr(), srv.Addr, plan)
	// The gate's connection is open, and Redis knows both scripts: an
	// EVALSHA answered NOSCRIPT too late would send no EVAL, and a new
	// connection's handshake answered too late no command at all.
	if code, status := rig.serve(t, "/", 1); code != 200 || status != "charged" {
		t.Fatalf("before: %d %s", code, status)
	}
	if _, _, err := rig.direct.ChargeOverdraft(context.Background(), "warm-up", plan, 1, "warm-up"); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { admin.Close() })
	config := func(maxmemory string) {
		t.Helper()
		if err := admin.ConfigSet(context.Background(), "maxmemory", maxmemory).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// Redis refuses every write (out of memory): the charge is refused,
	// surely not made, and the connection stays open.
	config("1")
	if code, status := rig.serve(t, "/", 3); code != 200 || status != "unmetered-pending" {
		t.Fatalf("Redis out of memory: %d %s", code, status)
	}
	// Redis takes writes again, but its answers come back after the
	// budget: the next try is made, and the gate never learns it. The
	// switch is made while the retrier sleeps, 1.6 s after its fifth
	// failure: a try sent between the two changes would meet the refusal
	// late, lose its connection, and every later try would wait on a new
	// connection's handshake, whose answer is as late.
	for deadline := time.Now().Add(20 * time.Second); rig.count(quotahttp.EventChargeRetryFailed) < 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gate did not retry the pending charge 5 times")
		}
	}
	proxy.SetLatency(0, time.Second)
	config("0")
	for deadline := time.Now().Add(20 * time.Second); rig.used(t)[0] != 1+3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no try of the pending charge reached Redis")
		}
	}
	if rig.gate.Pending() != 1 {
		t.Fatal("the gate owes nothing: a try answered within its budget through a second's delay")
	}
	proxy.SetLatency(0, 0)
	rig.settled(t)
	if u := rig.used(t); u[0] != 1+3 {
		t.Errorf("used %v after a try whose answer was lost and its retry, want 4", u)
	}
	if n := rig.count(quotahttp.EventChargeApplied); n != 1 {
		t.Errorf("%d pending charges applied, want 1", n)
	}
}

// The gate owes at most its pending limit: beyond it a request is served
// unmetered with nothing owed, and the observer told. Work that fails owes
// nothing; work settled owes what it settled at.
func TestPendingLimitFailuresAndSettling(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	plan := mustPlan(t, quota.PerMinute(100))
	rig := newPendingRig(t, srv.Addr, srv.Addr, plan, quotahttp.WithPendingLimit(3))
	srv.Stop()
	for i, r := range []struct {
		path   string
		code   int
		status string
	}{
		{"/", 200, "unmetered-pending"},
		{"/settle", 200, "unmetered-pending"}, // at 1 of 5
		{"/fail", 500, "unmetered"},           // owes nothing, and frees its slot
		{"/", 200, "unmetered-pending"},
		{"/", 200, "unmetered"}, // beyond the limit
	} {
		if code, status := rig.serve(t, r.path, 5); code != r.code || status != r.status {
			t.Errorf("request %d to %s: %d %s, want %d %s", i, r.path, code, status, r.code, r.status)
		}
	}
	if n := rig.count(quotahttp.EventChargeDropped); n != 1 {
		t.Errorf("%d charges dropped, want 1 (the last request)", n)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	rig.settled(t)
	if u := rig.used(t); u[0] != 5+1+5 {
		t.Errorf("used %v, want 11: 5, 1 settled, 5; not the failed work, nor the last (dropped)", u)
	}
}
