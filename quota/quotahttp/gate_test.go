package quotahttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
)

func TestMain(m *testing.M) { os.Exit(quotatest.Main(m)) }

// epoch is where test clocks start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixedStore is a memory store on a clock that moves only when told.
func fixedStore() (*quota.Memory, *time.Time) {
	now := epoch
	return quota.NewMemory(func() time.Time { return now }), &now
}

func mustPlan(t *testing.T, limits ...quota.Limit) quota.Plan {
	t.Helper()
	p, err := quota.NewPlan("test", limits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// costHeader prices a request by its X-Cost header (1 without one).
func costHeader(r *http.Request) (int64, error) {
	if s := r.Header.Get("X-Cost"); s != "" {
		return strconv.ParseInt(s, 10, 64)
	}
	return 1, nil
}

func request(cost int64) *http.Request { return requestTo("/search", cost) }

func requestTo(target string, cost int64) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.RemoteAddr = "192.0.2.7:4000"
	r.Header.Set("X-Cost", strconv.FormatInt(cost, 10))
	return r
}

func used(t *testing.T, s quotahttp.Store, identity string, p quota.Plan) int64 {
	t.Helper()
	d, err := s.Peek(context.Background(), identity, p)
	if err != nil {
		t.Fatal(err)
	}
	return d.Limits[0].Used
}

func TestAdmitsWhatFitsAndRefusesTheRest(t *testing.T) {
	store, _ := fixedStore()
	plan := mustPlan(t, quota.Limit{Name: "ten-seconds", Max: 10, Window: 10 * time.Second})
	var served int
	h := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader)).Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }))

	for i, want := range []int{200, 200, 200, 429, 200} {
		cost := []int64{4, 4, 1, 2, 1}[i]
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(cost))
		if w.Code != want {
			t.Fatalf("request %d (cost %d): status %d, want %d", i, cost, w.Code, want)
		}
		if got := w.Header().Get("X-RateLimit-Cost"); got != strconv.FormatInt(cost, 10) {
			t.Errorf("request %d: X-RateLimit-Cost %q, want %d", i, got, cost)
		}
		if want == 429 {
			var p quotahttp.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code != "quota-exceeded" || p.Limit != "ten-seconds" || p.Cost != 2 {
				t.Errorf("denial body %s (%v)", w.Body, err)
			}
			if w.Header().Get("Retry-After") != "10" || w.Header().Get("RateLimit") != `"ten-seconds";r=1;t=10` {
				t.Errorf("denial headers %v", w.Header())
			}
		}
	}
	if served != 4 {
		t.Errorf("served %d requests, want 4", served)
	}
	if u := used(t, store, "192.0.2.7", plan); u != 10 {
		t.Errorf("used %d units, want 10: a denied request is never charged", u)
	}
}

// A cost no state of the plan admits is a 422, charged nothing, with no
// Retry-After: no wait would admit it, not even once the limits are
// spent and a smaller cost is told when to come back.
func TestTooCostlyIsRefusedUncharged(t *testing.T) {
	store, _ := fixedStore()
	plan := mustPlan(t, quota.PerMinute(100), quota.Limit{Name: "burst", Max: 5, Window: time.Second})
	h := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader)).Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Cost") == "6" {
				t.Error("served a request over the plan")
			}
		}))
	tooCostly := func(when string) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(6))
		var p quotahttp.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 422 || p.Code != "cost-exceeds-plan" || p.MaxCost != 5 || p.Limit != "burst" {
			t.Errorf("%s: status %d, body %s", when, w.Code, w.Body)
		}
		if ra := w.Header().Values("Retry-After"); len(ra) != 0 || p.RetryAfterMS != 0 {
			t.Errorf("%s: a 422 with Retry-After %q, retry_after_ms %d; want neither", when, ra, p.RetryAfterMS)
		}
	}
	tooCostly("with the limits unused")
	if u := used(t, store, "192.0.2.7", plan); u != 0 {
		t.Errorf("used %d, want 0", u)
	}
	for _, want := range []int{200, 429} { // the burst spent, then a denial
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(5))
		if w.Code != want {
			t.Fatalf("cost 5: status %d, want %d", w.Code, want)
		}
	}
	tooCostly("with the burst spent")
}

// The charge comes back when the handler fails, panics, or its client is
// gone before the work, and the headers say so.
func TestRefundsFailedWork(t *testing.T) {
	plan := mustPlan(t, quota.PerMinute(100))
	cases := []struct {
		name    string
		handler http.HandlerFunc
		cancel  bool
		want    string // X-Quota-Status
	}{
		{"5xx", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "db down", http.StatusServiceUnavailable) }, false, "refunded"},
		{"499", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(499) }, false, "refunded"},
		{"panic", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }, false, "refunded"},
		{"client gone", func(w http.ResponseWriter, r *http.Request) { t.Error("work ran for a client gone") }, true, "refunded"},
		{"success", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }, false, "charged"},
		{"4xx after the charge", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }, false, "charged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store, _ := fixedStore()
			h := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader)).Handler(c.handler)
			r := request(7)
			if c.cancel {
				ctx, cancel := context.WithCancel(r.Context())
				cancel()
				r = r.WithContext(ctx)
			}
			w := httptest.NewRecorder()
			func() {
				defer func() { _ = recover() }()
				h.ServeHTTP(w, r)
			}()
			if got := w.Header().Get(quotahttp.HeaderStatus); got != c.want {
				t.Errorf("X-Quota-Status %q, want %q", got, c.want)
			}
			wantUsed := int64(0)
			if c.want == "charged" {
				wantUsed = 7
			}
			if u := used(t, store, "192.0.2.7", plan); u != wantUsed {
				t.Errorf("used %d, want %d", u, wantUsed)
			}
			if c.want == "refunded" && w.Header().Get("X-RateLimit-Remaining") != "100" {
				t.Errorf("refunded, yet X-RateLimit-Remaining %q", w.Header().Get("X-RateLimit-Remaining"))
			}
		})
	}
}

func TestSettleLowersTheCharge(t *testing.T) {
	store, _ := fixedStore()
	plan := mustPlan(t, quota.PerMinute(100))
	var seen quotahttp.Metering
	h := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader)).Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen, _ = quotahttp.FromContext(r.Context())
			if err := quotahttp.Settle(r.Context(), 3); err != nil {
				t.Error(err)
			}
			if err := quotahttp.Settle(r.Context(), 9); !errors.Is(err, quota.ErrInvalid) {
				t.Errorf("settling above the charge: %v, want quota.ErrInvalid", err)
			}
		}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(8))
	if seen.Status != quotahttp.StatusCharged || seen.Cost != 8 || !seen.Decision.Allowed || seen.Decision.Receipt.IsZero() {
		t.Errorf("FromContext in the handler: %+v", seen)
	}
	if u := used(t, store, "192.0.2.7", plan); u != 3 {
		t.Errorf("used %d, want 3 once settled", u)
	}
	if w.Header().Get(quotahttp.HeaderSettledCost) != "3" || w.Header().Get("X-RateLimit-Remaining") != "97" || w.Header().Get("X-RateLimit-Cost") != "8" {
		t.Errorf("headers after settling: %v", w.Header())
	}
	if err := quotahttp.Settle(context.Background(), 1); !errors.Is(err, quotahttp.ErrNotGated) {
		t.Errorf("Settle outside a gate: %v", err)
	}
}

// The handler's context is the request's with the metering in it: values
// set before the gate, the metering from a context derived in the handler,
// and the request's cancellation and its cause all reach the handler.
func TestHandlerContext(t *testing.T) {
	store, _ := fixedStore()
	type key struct{}
	gone := errors.New("client gone")
	ctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, "outer"))
	started, release := make(chan struct{}), make(chan struct{})
	var (
		value  any
		m      quotahttp.Metering
		gated  bool
		cause  error
		bounds bool
	)
	h := quotahttp.Limit(store, mustPlan(t, quota.PerMinute(100)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner, stop := context.WithTimeout(r.Context(), time.Minute)
			defer stop()
			value = inner.Value(key{})
			m, gated = quotahttp.FromContext(inner)
			for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
				if s := fmt.Sprintf(format, r.Context()); strings.Contains(s, "secret-key") || !strings.Contains(s, "WithValue") {
					t.Errorf("the handler's context printed with %s: %s", format, s)
				}
			}
			close(started)
			<-release
			select {
			case <-inner.Done():
				cause = context.Cause(inner)
			case <-time.After(5 * time.Second):
			}
			_, bounds = inner.Deadline()
		}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := request(1).WithContext(ctx)
		r.Header.Set("X-API-Key", "secret-key")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	<-started
	cancel(gone)
	close(release)
	<-done
	if value != "outer" {
		t.Errorf("a value of the request's context: %v, want outer", value)
	}
	if !gated || m.Status != quotahttp.StatusCharged {
		t.Errorf("FromContext on a context derived in the handler: %+v, %v", m, gated)
	}
	if !errors.Is(cause, gone) {
		t.Errorf("the request's cancellation reached the handler as %v, want its cause %v", cause, gone)
	}
	if !bounds {
		t.Error("a deadline set in the handler is lost")
	}
}

// deadlines is a client hook that keeps, for each command sent, how long
// its context gave it when the client took it.
type deadlines struct {
	mu   sync.Mutex
	left []time.Duration // -1 for a context without a deadline
}

func (h *deadlines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		left := time.Duration(-1)
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		h.mu.Lock()
		h.left = append(h.left, left)
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *deadlines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *deadlines) first() (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.left) == 0 {
		return 0, false
	}
	return h.left[0], true
}

// A store that cannot be reached: fail open serves unmetered, its charge
// pending, fail closed answers 503, both within the budget. The store is a
// real redis-server, stopped (its port refuses) or hung (SIGSTOP: it
// accepts and never answers), through a client with production's options.
// The charge's context carries the budget's deadline, and the gate answers
// within the budget and a margin: its own work with an in-memory handler
// is well under a millisecond, the 100 ms are for a loaded machine's
// scheduling.
func TestStoreFailures(t *testing.T) {
	const budget, margin = 100 * time.Millisecond, 100 * time.Millisecond
	plan := mustPlan(t, quota.PerMinute(100))
	for _, fault := range []struct {
		name   string
		inject func(*testing.T, *quotatest.RedisServer)
	}{
		{"refused", func(_ *testing.T, s *quotatest.RedisServer) { s.Stop() }},
		{"hung", func(t *testing.T, s *quotatest.RedisServer) { s.Hang(t) }},
	} {
		for _, closed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/closed=%v", fault.name, closed), func(t *testing.T) {
				srv := quotatest.StartRedisServer(t)
				c := quotatest.NewClient(t, "redis://"+srv.Addr)
				sent := &deadlines{}
				c.AddHook(sent)
				fault.inject(t, srv)
				var mu sync.Mutex // the pending charge's retries are observed too
				var events []quotahttp.EventKind
				opts := []quotahttp.Option{quotahttp.WithPlan(plan), quotahttp.WithTimeout(budget),
					quotahttp.WithObserver(func(_ *http.Request, e quotahttp.Event) {
						mu.Lock()
						defer mu.Unlock()
						events = append(events, e.Kind)
					})}
				if closed {
					opts = append(opts, quotahttp.WithFailClosed())
				}
				served := false
				h := quotahttp.New(quota.NewRedis(c), opts...).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served = true
					if m, _ := quotahttp.FromContext(r.Context()); m.Status != quotahttp.StatusUnmeteredPending {
						t.Errorf("metering %+v, want unmetered-pending", m)
					}
				}))
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, request(1))
				took := time.Since(start)
				switch {
				case closed && (w.Code != 503 || served || w.Header().Get("Retry-After") != "1"):
					t.Errorf("fail closed: status %d, served %v, headers %v", w.Code, served, w.Header())
				case !closed && (w.Code != 200 || !served || w.Header().Get(quotahttp.HeaderStatus) != "unmetered-pending"):
					t.Errorf("fail open: status %d, served %v, headers %v", w.Code, served, w.Header())
				}
				if left, ok := sent.first(); !ok || left <= 0 || left > budget {
					t.Errorf("the charge was sent with %v left of its context (sent: %v); want the budget's deadline, at most %v", left, ok, budget)
				}
				if took > budget+margin {
					t.Errorf("answered after %v with Redis %s; want within the budget %v and a margin of %v", took, fault.name, budget, margin)
				}
				want := []quotahttp.EventKind{quotahttp.EventStoreFailed}
				if !closed {
					want = append(want, quotahttp.EventChargeQueued)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(events) < len(want) || !slices.Equal(events[:len(want)], want) {
					t.Errorf("events %v, want %v first", events, want)
				}
			})
		}
	}
}

// Every kind of event has a name of its own, for logs.
func TestEventKindNames(t *testing.T) {
	seen := map[string]quotahttp.EventKind{}
	for k := quotahttp.EventAllowed; k <= quotahttp.EventLateRetried; k++ {
		name := k.String()
		if name == "" || strings.HasPrefix(name, "EventKind(") {
			t.Errorf("kind %d has no name: %q", int(k), name)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("kinds %d and %d are both %q", int(other), int(k), name)
		}
		seen[name] = k
	}
	if got := quotahttp.EventKind(0).String(); got != "EventKind(0)" {
		t.Errorf("the zero kind is %q", got)
	}
}

// lateScripts is a client hook that holds each of the next n script calls
// for d before sending it: with d past the halfway mark of the budget,
// the script reaches Redis after the charge's deadline and Redis answers
// that it came too late (quota.ErrLate), within the budget.
type lateScripts struct {
	n atomic.Int32
	d time.Duration
}

func (h *lateScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "fcall" || name == "evalsha") && h.n.Add(-1) >= 0 {
			time.Sleep(h.d)
		}
		return next(ctx, cmd)
	}
}

func (h *lateScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A charge that Redis answers as late (it reached Redis after the halfway
// mark of its budget, and was not made) shows Redis alive and the machine
// slow: the gate tries it again, on a budget of its own, up to three
// tries, then fails as for any store error. Nothing is charged for a late
// try. Failing closed, so that a late answer not tried again is a 503.
func TestLateChargeTriedAgain(t *testing.T) {
	// A late try is held 700 ms: past the halfway mark, 300 ms before the
	// budget's end for Redis's answer on a loaded machine.
	const budget = time.Second
	plan := mustPlan(t, quota.PerMinute(100))
	for _, tc := range []struct {
		late   int32 // tries Redis answers as late
		status int
		used   int64
		events []quotahttp.EventKind
	}{
		{0, 200, 3, []quotahttp.EventKind{quotahttp.EventAllowed}},
		{1, 200, 3, []quotahttp.EventKind{quotahttp.EventLateRetried, quotahttp.EventAllowed}},
		{2, 200, 3, []quotahttp.EventKind{quotahttp.EventLateRetried, quotahttp.EventLateRetried, quotahttp.EventAllowed}},
		{3, 503, 0, []quotahttp.EventKind{quotahttp.EventLateRetried, quotahttp.EventLateRetried, quotahttp.EventStoreFailed}},
	} {
		t.Run(fmt.Sprintf("late=%d", tc.late), func(t *testing.T) {
			srv := quotatest.StartRedisServer(t)
			c := quotatest.NewClient(t, srv.URL())
			late := &lateScripts{d: budget * 7 / 10}
			c.AddHook(late)
			store := quota.NewRedis(c)
			// A first charge loads the scripts and measures Redis's clock,
			// without which a charge carries no deadline.
			if _, err := store.Charge(context.Background(), "warm-up", plan, 1); err != nil {
				t.Fatal(err)
			}
			late.n.Store(tc.late)
			var events []quotahttp.EventKind // the observer runs on the request's goroutine
			h := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader),
				quotahttp.WithTimeout(budget), quotahttp.WithFailClosed(),
				quotahttp.WithObserver(func(_ *http.Request, e quotahttp.Event) {
					events = append(events, e.Kind)
					if e.Kind == quotahttp.EventLateRetried && !errors.Is(e.Err, quota.ErrLate) {
						t.Errorf("a retry's event has err %v, want quota.ErrLate", e.Err)
					}
				})).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, request(3))
			if w.Code != tc.status {
				t.Errorf("status %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if !slices.Equal(events, tc.events) {
				t.Errorf("events %v, want %v", events, tc.events)
			}
			d, err := store.Peek(context.Background(), "192.0.2.7", plan)
			if err != nil {
				t.Fatal(err)
			}
			if used := d.Limits[0].Used; used != tc.used {
				t.Errorf("used %d, want %d: a late try was charged, or the last one was not", used, tc.used)
			}
		})
	}
}

func TestShadowServesWhatItWouldRefuse(t *testing.T) {
	store, _ := fixedStore()
	plan := mustPlan(t, quota.Limit{Name: "burst", Max: 2, Window: time.Second})
	radius := errors.New("radius above the plan's")
	h := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithShadow(),
		quotahttp.WithCost(func(r *http.Request) (int64, error) {
			if r.URL.Query().Get("radius") == "huge" {
				return 0, quotahttp.Refuse(radius)
			}
			return costHeader(r)
		})).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i, c := range []struct {
		target string
		cost   int64
		want   string
	}{
		{"/", 2, "charged"},
		{"/", 1, "shadow-denied"},
		{"/", 3, "shadow-denied"},
		{"/?radius=huge", 1, "shadow-denied"},
	} {
		r := requestTo(c.target, c.cost)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || w.Header().Get(quotahttp.HeaderStatus) != c.want {
			t.Errorf("request %d: status %d, %s %q, want 200 %q", i, w.Code, quotahttp.HeaderStatus, w.Header().Get(quotahttp.HeaderStatus), c.want)
		}
	}
	if u := used(t, store, "192.0.2.7", plan); u != 2 {
		t.Errorf("used %d, want 2: shadow mode charges only what fits", u)
	}

	// Without shadow mode, the refusal is answered with its error.
	var got error
	h = quotahttp.New(store, quotahttp.WithPlan(plan),
		quotahttp.WithCost(func(*http.Request) (int64, error) { return 0, quotahttp.Refuse(radius) }),
		quotahttp.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) { got = err; w.WriteHeader(422) }),
	).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("served a refusal") }))
	h.ServeHTTP(httptest.NewRecorder(), request(1))
	if !errors.Is(got, radius) {
		t.Errorf("error handler given %v, want the refusal", got)
	}
}

// Errors of the identity function carry their status to the problem.
func TestIdentityErrors(t *testing.T) {
	store, _ := fixedStore()
	h := quotahttp.New(store, quotahttp.WithPlan(mustPlan(t, quota.PerMinute(1))),
		quotahttp.WithIdentity(func(r *http.Request) (string, error) {
			if k := r.Header.Get("X-API-Key"); k != "" {
				return k, nil
			}
			return "", missingKey{}
		})).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(1))
	var p quotahttp.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 401 || p.Detail != "send X-API-Key" {
		t.Errorf("status %d, body %s", w.Code, w.Body)
	}
}

type missingKey struct{}

func (missingKey) Error() string   { return "send X-API-Key" }
func (missingKey) HTTPStatus() int { return 401 }

// The gate is plain middleware: the same handler limited under the
// standard mux and no router, over real HTTP (and under chi in tileapi's
// internal/interop, as this module does not require chi).
func TestRouters(t *testing.T) {
	plan := mustPlan(t, quota.PerMinute(2))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	routers := map[string]func(store quotahttp.Store) http.Handler{
		"none": func(s quotahttp.Store) http.Handler { return quotahttp.Limit(s, plan)(ok) },
		"ServeMux": func(s quotahttp.Store) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("GET /search", quotahttp.Limit(s, plan)(ok))
			return mux
		},
	}
	for name, route := range routers {
		t.Run(name, func(t *testing.T) {
			store, _ := fixedStore()
			srv := httptest.NewServer(route(store))
			defer srv.Close()
			var codes []int
			for range 3 {
				resp, err := http.Get(srv.URL + "/search")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				codes = append(codes, resp.StatusCode)
			}
			if fmt.Sprint(codes) != "[200 200 429]" {
				t.Errorf("statuses %v, want [200 200 429]", codes)
			}
		})
	}
}

// Many servers' worth of concurrent requests through gates sharing one
// Redis admit exactly what the limit holds, and failures are refunded.
func TestConcurrentExactnessOverRedis(t *testing.T) {
	rdb := quotatest.NewClient(t, quotatest.RedisURL(t))
	prefix := fmt.Sprintf("quotahttptest:%d:", time.Now().UnixNano())
	plan := mustPlan(t, quota.PerHour(1000))
	var servers []*httptest.Server
	var served atomic.Int64
	for range 4 {
		g := quotahttp.New(quota.NewRedis(rdb, quota.WithPrefix(prefix)), quotahttp.WithPlan(plan),
			quotahttp.WithIdentity(func(*http.Request) (string, error) { return "shared", nil }),
			quotahttp.WithCost(costHeader), quotahttp.WithTimeout(5*time.Second))
		servers = append(servers, httptest.NewServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("fail") != "" {
				w.WriteHeader(500)
				return
			}
			m, _ := quotahttp.FromContext(r.Context())
			served.Add(m.Cost)
		}))))
	}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	var wg sync.WaitGroup
	var admitted, refunded, denied atomic.Int64
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cost := int64(1 + i%7)
			url := servers[i%len(servers)].URL + "/"
			if i%5 == 0 {
				url += "?fail=1"
			}
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("X-Cost", strconv.FormatInt(cost, 10))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			switch resp.Header.Get(quotahttp.HeaderStatus) {
			case "charged":
				admitted.Add(cost)
			case "refunded":
				refunded.Add(cost)
			}
			if resp.StatusCode == http.StatusTooManyRequests {
				denied.Add(1)
			}
		}()
	}
	wg.Wait()
	store := quota.NewRedis(rdb, quota.WithPrefix(prefix))
	u := used(t, store, "shared", plan)
	if u != admitted.Load() || u != served.Load() || u > 1000 {
		t.Errorf("Redis holds %d units; the clients were charged %d, the handlers served %d; limit 1000", u, admitted.Load(), served.Load())
	}
	// 400 requests cost 1600 units: the limit must have bitten.
	if denied.Load() == 0 {
		t.Errorf("no request denied; %d units admitted", u)
	}
	if refunded.Load() == 0 {
		t.Error("no failed request was refunded")
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A plan's RateLimit-Policy is cached by name; a plan of the same name
// with other limits (a key's own overrides) gets its own.
func TestPolicyFollowsThePlan(t *testing.T) {
	store, _ := fixedStore()
	small, big := mustPlan(t, quota.PerMinute(10)), mustPlan(t, quota.PerMinute(20), quota.PerDay(500))
	h := quotahttp.New(store, quotahttp.WithPlanFunc(func(r *http.Request, _ string) (quota.Plan, error) {
		if r.URL.Query().Get("big") != "" {
			return big, nil
		}
		return small, nil
	})).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i, c := range []struct{ target, want string }{
		{"/", `"minute";q=10;w=60`},
		{"/?big=1", `"minute";q=20;w=60, "day";q=500;w=86400`},
		{"/", `"minute";q=10;w=60`},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, requestTo(c.target, 1))
		if got := w.Header().Get("RateLimit-Policy"); got != c.want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i, got, c.want)
		}
	}
}

// Headers longer than the room the gate keeps for them (four limits with
// long names) come out whole.
func TestHeadersOfManyLimits(t *testing.T) {
	store, _ := fixedStore()
	plan := mustPlan(t,
		quota.Limit{Name: "a-rather-long-burst-limit-name", Max: 50, Window: 5 * time.Second},
		quota.Limit{Name: "a-rather-long-minute-limit-name", Max: 300, Window: time.Minute},
		quota.Limit{Name: "a-rather-long-hour-limit-name", Max: 9000, Window: time.Hour},
		quota.Limit{Name: "a-rather-long-daily-limit-name", Max: 100_000, Period: quota.Day},
	)
	w := httptest.NewRecorder()
	quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader)).Handler(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, request(7))
	want := map[string]string{
		"RateLimit": `"a-rather-long-burst-limit-name";r=43;t=5, "a-rather-long-minute-limit-name";r=293;t=60, ` +
			`"a-rather-long-hour-limit-name";r=8993;t=3600, "a-rather-long-daily-limit-name";r=99993;t=43200`,
		"X-RateLimit-Limit":     "50",
		"X-RateLimit-Remaining": "43",
		"X-RateLimit-Reset":     "5",
		"X-RateLimit-Cost":      "7",
	}
	for key, v := range want {
		if got := w.Header().Get(key); got != v {
			t.Errorf("%s: %q, want %q", key, got, v)
		}
	}
}

// Usage shows the caller's use through the same identity and plan, and
// charges nothing.
func TestUsage(t *testing.T) {
	store, _ := fixedStore()
	plan := mustPlan(t, quota.PerMinute(10))
	g := quotahttp.New(store, quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader))
	g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), request(4))
	var shown quota.Decision
	usage := g.Usage(func(w http.ResponseWriter, r *http.Request, d quota.Decision) { shown = d })
	for range 2 {
		w := httptest.NewRecorder()
		usage.ServeHTTP(w, request(1))
		if shown.Limits[0].Used != 4 || w.Header().Get("RateLimit") != `"minute";r=6;t=60` {
			t.Errorf("usage %+v, RateLimit %q; want 4 used, 6 remaining", shown.Limits, w.Header().Get("RateLimit"))
		}
	}

	down := quotahttp.New(quota.NewRedis(redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})), quotahttp.WithPlan(plan))
	w := httptest.NewRecorder()
	down.Usage(func(http.ResponseWriter, *http.Request, quota.Decision) { t.Error("shown without a store") }).ServeHTTP(w, request(1))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("usage with the store down: status %d, want 503", w.Code)
	}
}

// A refusal says so in X-Quota-Status: a denial (429), a price beyond the
// plan (422), a refusal of the caller's pricing (Refuse), a store failing
// closed (503) are "refused", charged nothing; in shadow mode they are
// served "shadow-denied". What fails before the price is made (the caller
// not identified) carries no status.
func TestRefusalsSayRefused(t *testing.T) {
	plan := mustPlan(t, quota.PerMinute(10))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	refusing := quotahttp.WithCost(func(*http.Request) (int64, error) {
		return 0, quotahttp.Refuse(statusErr(http.StatusUnprocessableEntity))
	})
	dead := quota.NewRedis(redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1}))
	cases := []struct {
		name   string
		store  quotahttp.Store
		opts   []quotahttp.Option
		cost   int64
		code   int
		status string
	}{
		{"admitted", nil, nil, 6, 200, "charged"},
		{"denied", nil, nil, 6, 429, "refused"}, // after the one admitted
		{"too costly", nil, nil, 11, 422, "refused"},
		{"refused by the pricing", nil, []quotahttp.Option{refusing}, 1, 422, "refused"},
		{"store down, failing closed", dead, []quotahttp.Option{quotahttp.WithFailClosed()}, 1, 503, "refused"},
		{"denied in shadow mode", nil, []quotahttp.Option{quotahttp.WithShadow()}, 6, 200, "shadow-denied"},
		{"no caller", nil, []quotahttp.Option{quotahttp.WithIdentity(func(*http.Request) (string, error) {
			return "", statusErr(http.StatusUnauthorized)
		})}, 1, 401, ""},
	}
	store, _ := fixedStore()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.store
			if s == nil {
				s = store
			}
			w := httptest.NewRecorder()
			opts := append([]quotahttp.Option{quotahttp.WithPlan(plan), quotahttp.WithCost(costHeader)}, c.opts...)
			quotahttp.New(s, opts...).Handler(ok).ServeHTTP(w, request(c.cost))
			if got := w.Header().Values(quotahttp.HeaderStatus); w.Code != c.code || w.Header().Get(quotahttp.HeaderStatus) != c.status || len(got) > 1 {
				t.Errorf("%d, X-Quota-Status %q; want %d, %q", w.Code, got, c.code, c.status)
			}
			// Only a refusal that a wait can end says when to retry.
			if ra, want := w.Header().Get("Retry-After"), c.code == 429 || c.code == 503; (ra != "") != want {
				t.Errorf("%d with Retry-After %q; want one: %v", w.Code, ra, want)
			}
		})
	}
}

// statusErr is an error answered with its status.
type statusErr int

func (e statusErr) Error() string   { return http.StatusText(int(e)) }
func (e statusErr) HTTPStatus() int { return int(e) }
