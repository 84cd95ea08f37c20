package quotahttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// ServeRequest meters what the service decided: its identity, plan and
// cost are charged in Redis, with no identity, plan or cost options on
// the gate; a refusal known up front and a hold refused are answered
// uncharged, or served in shadow mode; a hold that fails is the failure
// policy's; the request's own charge and error answer are used.
func TestServeRequest(t *testing.T) {
	store := quota.NewRedis(quotatest.NewClient(t, quotatest.RedisURL(t)), quota.WithPrefix(fmt.Sprintf("serverequest:%d:", time.Now().UnixNano())))
	plan := mustPlan(t, quota.PerMinute(10))
	errBusy := statusErr(http.StatusConflict) // a refusal of the service's own, with its status
	type want struct {
		code    int
		status  string
		served  bool
		charged int64 // the identity's usage after
	}
	for _, tc := range []struct {
		name string
		opts []quotahttp.Option
		req  quotahttp.Request
		want want
	}{
		{"charged", nil, quotahttp.Request{Cost: 3}, want{200, "charged", true, 3}},
		{"refused up front", nil, quotahttp.Request{Cost: 3, Refusal: quotahttp.Refuse(errBusy)}, want{409, "refused", false, 0}},
		{"refused up front, shadow", []quotahttp.Option{quotahttp.WithShadow()}, quotahttp.Request{Cost: 3, Refusal: quotahttp.Refuse(errBusy)}, want{200, "shadow-denied", true, 0}},
		{"hold refused", nil, quotahttp.Request{Cost: 3, Hold: func(context.Context) (func(context.Context) error, error) { return nil, quotahttp.Refuse(errBusy) }}, want{409, "refused", false, 0}},
		{"hold failed, open", nil, quotahttp.Request{Cost: 3, Hold: func(context.Context) (func(context.Context) error, error) { return nil, errors.New("redis down") }}, want{200, "charged", true, 3}},
		{"hold failed, closed", []quotahttp.Option{quotahttp.WithFailClosed()}, quotahttp.Request{Cost: 3, Hold: func(context.Context) (func(context.Context) error, error) { return nil, errors.New("redis down") }}, want{503, "refused", false, 0}},
		{"own charge", nil, quotahttp.Request{Cost: 3, Charge: func(ctx context.Context, s quotahttp.Store) (quota.Decision, error) {
			return s.Charge(ctx, "own", plan, 7) // charged elsewhere, at another price
		}}, want{200, "charged", true, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			identity := "id-" + t.Name()
			tc.req.Identity, tc.req.Plan = identity, plan
			released := false
			if hold := tc.req.Hold; hold != nil {
				tc.req.Hold = func(ctx context.Context) (func(context.Context) error, error) {
					_, err := hold(ctx)
					return func(context.Context) error { released = true; return nil }, err
				}
			}
			answered := ""
			tc.req.OnError = func(w http.ResponseWriter, r *http.Request, err error) {
				answered = err.Error()
				quotahttp.WriteProblem(w, r, err)
			}
			// No plan, identity or cost options: ServeRequest needs none.
			// A generous budget: this test is about who decides what, and
			// on a busy machine (or beside a test's SCRIPT FLUSH) a charge
			// can miss the default 50 ms and be served unmetered.
			gate := quotahttp.New(store, append([]quotahttp.Option{quotahttp.WithTimeout(5 * time.Second)}, tc.opts...)...)
			served := false
			w := httptest.NewRecorder()
			gate.ServeRequest(w, requestTo("/", 1), tc.req, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
			got := want{w.Code, w.Header().Get(quotahttp.HeaderStatus), served, used(t, store, identity, plan)}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !tc.want.served && answered == "" {
				t.Error("the request's own error answer was not used")
			}
			if released {
				t.Error("a hold that failed was released")
			}
		})
	}
	if u := used(t, store, "own", plan); u != 7 {
		t.Errorf("the request's own charge made %d units, want 7", u)
	}
}

// A hold taken is released once the request is done, after its handler.
func TestServeRequestReleasesItsHold(t *testing.T) {
	store := quota.NewMemory(nil)
	plan := mustPlan(t, quota.PerMinute(10))
	var events []string
	req := quotahttp.Request{Identity: "id", Plan: plan, Cost: 1, Hold: func(context.Context) (func(context.Context) error, error) {
		events = append(events, "held")
		return func(context.Context) error { events = append(events, "released"); return nil }, nil
	}}
	quotahttp.New(store).ServeRequest(httptest.NewRecorder(), requestTo("/", 1), req,
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { events = append(events, "served") }))
	if fmt.Sprint(events) != "[held served released]" {
		t.Errorf("events %v, want [held served released]", events)
	}
}

// A gate without a plan serves requests through ServeRequest only:
// Handler refuses to be built, a programming error.
func TestHandlerNeedsAPlan(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Handler of a gate without a plan did not panic")
		}
	}()
	quotahttp.New(quota.NewMemory(nil)).Handler(http.NotFoundHandler())
}

// A release that fails is told to the observer and tried again in the
// background until it is made.
func TestServeRequestRetriesARelease(t *testing.T) {
	plan := mustPlan(t, quota.PerMinute(10))
	var mu sync.Mutex
	tries, failed := 0, 0
	req := quotahttp.Request{Identity: "id", Plan: plan, Cost: 1, Hold: func(context.Context) (func(context.Context) error, error) {
		return func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if tries++; tries < 3 {
				return errors.New("redis down")
			}
			return nil
		}, nil
	}}
	gate := quotahttp.New(quota.NewMemory(nil), quotahttp.WithObserver(func(_ *http.Request, e quotahttp.Event) {
		if e.Kind == quotahttp.EventReleaseFailed {
			mu.Lock()
			failed++
			mu.Unlock()
		}
	}))
	gate.ServeRequest(httptest.NewRecorder(), requestTo("/", 1), req, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for deadline := time.Now().Add(10 * time.Second); gate.Pending() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the release is still owed after 10 s")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if tries != 3 || failed != 1 {
		t.Errorf("%d tries, %d failures observed; want 3 tries (two failing) and the first failure observed", tries, failed)
	}
}
