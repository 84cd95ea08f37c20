package quotahttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// ServeRequest meters what the service decided: its identity, plan and
// cost are charged in Redis, with no identity, plan or cost options on
// the gate; a refusal known up front and a charge its hold refuses are
// answered uncharged, or served in shadow mode; a hold's charge that fails
// is the failure policy's; the request's own charge and error answer are
// used, through the hold's store.
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
	held := &quota.SlotsHeldError{Max: 2, Expires: 5 * time.Second}
	for _, tc := range []struct {
		name string
		opts []quotahttp.Option
		req  quotahttp.Request
		hold error // what the hold's store answers in place of charging, if set
		want want
	}{
		{"charged", nil, quotahttp.Request{Cost: 3}, nil, want{200, "charged", true, 3}},
		{"refused up front", nil, quotahttp.Request{Cost: 3, Refusal: quotahttp.Refuse(errBusy)}, nil, want{409, "refused", false, 0}},
		{"refused up front, shadow", []quotahttp.Option{quotahttp.WithShadow()}, quotahttp.Request{Cost: 3, Refusal: quotahttp.Refuse(errBusy)}, nil, want{200, "shadow-denied", true, 0}},
		{"held", nil, quotahttp.Request{Cost: 3}, errNone, want{200, "charged", true, 3}},
		{"hold refused", nil, quotahttp.Request{Cost: 3}, held, want{429, "refused", false, 0}},
		{"hold refused, shadow", []quotahttp.Option{quotahttp.WithShadow()}, quotahttp.Request{Cost: 3}, held, want{200, "shadow-denied", true, 0}},
		{"hold failed, open", nil, quotahttp.Request{Cost: 3}, errors.New("redis down"), want{200, "unmetered-pending", true, 3}},
		{"hold failed, closed", []quotahttp.Option{quotahttp.WithFailClosed()}, quotahttp.Request{Cost: 3}, errors.New("redis down"), want{503, "refused", false, 0}},
		{"own charge", nil, quotahttp.Request{Cost: 3, Charge: func(ctx context.Context, s quotahttp.Store) (quota.Decision, error) {
			return s.Charge(ctx, "own", plan, 7) // charged elsewhere, at another price
		}}, errNone, want{200, "charged", true, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			identity := "id-" + t.Name()
			tc.req.Identity, tc.req.Plan = identity, plan
			released := 0
			if tc.hold != nil {
				tc.req.Hold = func(s quotahttp.Store) (quotahttp.Store, func()) {
					return &holdStore{Store: s, err: tc.hold}, func() { released++ }
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
			// A charge served unmetered is owed and made once the handler is done.
			for deadline := time.Now().Add(5 * time.Second); gate.Pending() > 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			got := want{w.Code, w.Header().Get(quotahttp.HeaderStatus), served, used(t, store, identity, plan)}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !tc.want.served && answered == "" {
				t.Error("the request's own error answer was not used")
			}
			if want := boolInt(tc.req.Hold != nil); released != want {
				t.Errorf("the hold was released %d times, want %d", released, want)
			}
		})
	}
	if u := used(t, store, "own", plan); u != 7 {
		t.Errorf("the request's own charge made %d units, want 7", u)
	}
}

// errNone is a holdStore that charges the store behind it.
var errNone = errors.New("none")

// holdStore is a hold's store (Request.Hold) that answers err in place of
// charging, unless err is errNone: a refusal of the hold, or a store down
// (which a real Redis cannot be made to be here without failing the
// other cases' charges).
type holdStore struct {
	quotahttp.Store
	err error
}

func (h *holdStore) Charge(ctx context.Context, identity string, plan quota.Plan, cost int64) (quota.Decision, error) {
	if h.err != errNone {
		return quota.Decision{}, h.err
	}
	return h.Store.Charge(ctx, identity, plan, cost)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A hold is taken with the charge and released once the request is done,
// after its handler, before the response goes out.
func TestServeRequestReleasesItsHold(t *testing.T) {
	store := quota.NewMemory(nil)
	plan := mustPlan(t, quota.PerMinute(10))
	var events []string
	req := quotahttp.Request{Identity: "id", Plan: plan, Cost: 1, Hold: func(s quotahttp.Store) (quotahttp.Store, func()) {
		events = append(events, "hold")
		return &recordingStore{Store: s, events: &events}, func() { events = append(events, "released") }
	}}
	quotahttp.New(store).ServeRequest(httptest.NewRecorder(), requestTo("/", 1), req,
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { events = append(events, "served") }))
	if fmt.Sprint(events) != "[hold charged served released]" {
		t.Errorf("events %v, want [hold charged served released]", events)
	}
}

// A body of known length gives the hold back before its last byte goes
// out: a client that has the whole answer may send its next request at
// once, before the handler returns.
func TestServeRequestReleasesBeforeTheLastByte(t *testing.T) {
	plan := mustPlan(t, quota.PerMinute(10))
	var events []string
	req := quotahttp.Request{Identity: "id", Plan: plan, Cost: 1, Hold: func(s quotahttp.Store) (quotahttp.Store, func()) {
		return s, func() { events = append(events, "released") }
	}}
	quotahttp.New(quota.NewMemory(nil)).ServeRequest(httptest.NewRecorder(), requestTo("/", 1), req,
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "5")
			_, _ = w.Write([]byte("hel"))
			events = append(events, "wrote 3")
			_, _ = w.Write([]byte("lo"))
			events = append(events, "wrote 5")
		}))
	if fmt.Sprint(events) != "[wrote 3 released wrote 5]" {
		t.Errorf("events %v, want [wrote 3 released wrote 5]", events)
	}
}

// recordingStore notes each charge in events.
type recordingStore struct {
	quotahttp.Store
	events *[]string
}

func (s *recordingStore) Charge(ctx context.Context, identity string, plan quota.Plan, cost int64) (quota.Decision, error) {
	*s.events = append(*s.events, "charged")
	return s.Store.Charge(ctx, identity, plan, cost)
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
