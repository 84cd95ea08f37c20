package quotahttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// Option configures a Gate.
type Option func(*Gate)

// WithIdentity sets how a request's caller is named: an API key's id, a
// user id, a client address (the default, ClientAddress). Each identity
// has its own quota. An error is answered by the error handler before any
// charge; give it an HTTPStatus method to choose its status (401 for a
// missing key, say).
func WithIdentity(identify func(r *http.Request) (string, error)) Option {
	return func(g *Gate) { g.identify = identify }
}

// WithPlan gives every caller the same plan.
func WithPlan(plan quota.Plan) Option {
	return func(g *Gate) {
		g.plan = func(*http.Request, string) (quota.Plan, error) { return plan, nil }
	}
}

// WithPlanFunc finds each caller's plan, for example from its API key's
// record. An error is answered by the error handler before any charge.
func WithPlanFunc(plan func(r *http.Request, identity string) (quota.Plan, error)) Option {
	return func(g *Gate) { g.plan = plan }
}

// WithCost sets how a request is priced, before its work: a cost of at
// least one unit. An error is answered by the error handler before any
// charge (a bad parameter, say: give it an HTTPStatus method); one made
// with Refuse is a refusal by the plan, served anyway in shadow mode.
// The default prices every request at one unit.
func WithCost(price func(r *http.Request) (int64, error)) Option {
	return func(g *Gate) { g.price = price }
}

// WithTimeout sets the time budget of each call of the store (default
// DefaultTimeout). A store that has not answered by then has failed, and
// the failure policy decides. A charge Redis answers as late
// (quota.ErrLate) is tried again, each try with a budget of its own: see
// the package's documentation.
func WithTimeout(d time.Duration) Option {
	return func(g *Gate) {
		if d > 0 {
			g.timeout = d
		}
	}
}

// WithFailClosed makes the gate answer 503 (an *UnavailableError) when the
// store fails, instead of serving the request unmetered.
func WithFailClosed() Option { return func(g *Gate) { g.failClosed = true } }

// WithPendingLimit sets how many refunds and charges the gate may owe the
// store at once (default DefaultPendingLimit): refunds that did not answer
// in time, and the charges of requests served unmetered, both retried in
// the background until the store answers, for up to ten minutes. Beyond
// it a refund is given up (the units stay charged) and a request is
// served unmetered with nothing pending (X-Quota-Status: unmetered).
// Each costs the memory of what the gate keeps of its request until it
// is made (about 1.4 KB in tileapi's server).
func WithPendingLimit(n int) Option {
	return func(g *Gate) {
		if n > 0 {
			g.backlog.limit = n
		}
	}
}

// WithShadow makes every decision and reports it in the headers and to the
// observer, but refuses nothing: what the quota would refuse is served
// unmetered, with X-Quota-Status: shadow-denied.
func WithShadow() Option { return func(g *Gate) { g.shadow = true } }

// WithHeaders chooses the headers written (default AllHeaders).
func WithHeaders(h Headers) Option { return func(g *Gate) { g.headers = h } }

// WithErrorHandler sets how refusals and failures are answered: err is a
// *DeniedError (429), a *quota.TooCostlyError (422), an *UnavailableError (503
// when failing closed), an error of the identity, plan or cost functions,
// a quota.ErrInvalid (the service priced out of range: 500), or the
// request context's error when the client went away before the work. The
// quota headers and Retry-After are already set. The default is
// WriteProblem.
func WithErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(g *Gate) { g.onError = h }
}

// WithRefundIf sets which statuses of the handler give the charge back
// (default RefundFailures: 5xx and 499).
func WithRefundIf(refund func(status int) bool) Option {
	return func(g *Gate) { g.refundIf = refund }
}

// WithObserver sets a function told of every decision, refund,
// settlement and pending charge, for metrics and logs. It runs on the
// request's goroutine (or that of the background retries, with what the
// gate kept of the request they retry for: its method, URL, client
// address and context, not its headers or body) and must be quick.
func WithObserver(observe func(r *http.Request, e Event)) Option {
	return func(g *Gate) { g.observe, g.observed = observe, observe != nil }
}

// Event is something the gate did, for an observer.
type Event struct {
	Kind     EventKind
	Identity string
	Plan     quota.Plan
	// Cost is the price of the request.
	Cost int64
	// Decision is the store's answer, for EventAllowed and EventDenied.
	Decision quota.Decision
	// Units are the units given back by a refund or a settlement, or
	// those of a pending charge queued or made.
	Units int64
	// Overage is, of the Units a pending charge made (EventChargeApplied),
	// those past a soft limit (quota.Receipt.Overage); of the Units a
	// refund or settlement gave back, those that had gone past one (they
	// come off the overage first). An admitted charge's own is its
	// Decision's Receipt.Overage.
	Overage int64
	// Err is the failure, for EventStoreFailed, EventInvalid and the
	// failed refunds and settlements, and the late try's for
	// EventLateRetried.
	Err error
	// Latency is how long the store took to charge.
	Latency time.Duration
	// Waited is how long the request waited in its caller's line before
	// its last charge (see WithMaxWait).
	Waited time.Duration
}

// EventKind says what an Event is.
type EventKind int

const (
	EventAllowed         EventKind = iota + 1 // charged and admitted
	EventDenied                               // the cost does not fit now
	EventTooCostly                            // the cost can never fit the plan
	EventInvalid                              // the store refused the call as invalid
	EventStoreFailed                          // the store failed or ran out of time
	EventRefunded                             // a charge was given back
	EventRefundFailed                         // a refund failed; it is retried in the background
	EventRefundAbandoned                      // a refund failed on every retry: the units stay charged
	EventSettled                              // part of a charge was given back by Settle
	EventSettleFailed                         // a settlement failed: the request stays charged its price
	// The charge of a request served unmetered, once its work is done: it
	// is made when the store answers again.
	EventChargeQueued
	EventChargeApplied     // a pending charge was made (Units 0: an earlier try was, its answer lost)
	EventChargeRetryFailed // a pending charge failed; it is tried again
	EventChargeDropped     // a pending charge was given up: its units are never charged
	// The request joined its caller's line to wait its turn (WithMaxWait);
	// its Decision is the denial it waits out, if it was charged before.
	EventWaiting
	// The request's hold (Request.Hold) refused its charge: every slot is
	// held (quota.ErrSlotsHeld). Nothing was charged.
	EventSlotsHeld
	// Redis answered the charge within the budget but too late to make it
	// (quota.ErrLate: it made nothing), as on a saturated machine; the
	// gate tries again, on a budget of its own, up to three tries in all.
	// Err is the late try's.
	EventLateRetried
)

var eventNames = [...]string{
	EventAllowed: "allowed", EventDenied: "denied", EventTooCostly: "too-costly", EventInvalid: "invalid",
	EventStoreFailed: "store-failed", EventRefunded: "refunded", EventRefundFailed: "refund-failed",
	EventRefundAbandoned: "refund-abandoned", EventSettled: "settled", EventSettleFailed: "settle-failed",
	EventChargeQueued: "charge-queued", EventChargeApplied: "charge-applied", EventChargeRetryFailed: "charge-retry-failed",
	EventChargeDropped: "charge-dropped", EventWaiting: "waiting", EventSlotsHeld: "slots-held", EventLateRetried: "late-retried",
}

// String names the kind, for logs: "allowed", "late-retried".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}
