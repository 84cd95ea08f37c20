package quotahttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// Status says how a request was metered; it is sent in X-Quota-Status on
// every response of a gated handler once the gate has priced the request.
// A request answered before (its caller not identified, its plan not
// found, its price not made: the caller's own errors) or that the store
// calls invalid (a bug of the service: a 500) was not metered, and
// carries none.
type Status string

const (
	StatusCharged Status = "charged"
	// StatusOverage: charged, and admitted past the max of a soft limit
	// (quota.Limit.Soft) as metered overage, where a hard one would have
	// refused it; the receipt's Overage says how many units went past.
	StatusOverage Status = "overage"
	// StatusRefunded: charged, then given back, because the handler failed.
	StatusRefunded Status = "refunded"
	// StatusRefundPending: charged, the handler failed, and the refund did
	// not answer in time: it goes on in the background.
	StatusRefundPending Status = "refund-pending"
	// StatusUnmetered: the store failed and the gate fails open; nothing
	// is charged (the store cannot charge later, or the gate owes it too
	// much already, or the work failed).
	StatusUnmetered Status = "unmetered"
	// StatusUnmeteredPending: the store failed and the gate fails open,
	// and the charge is made once the store answers again, in every limit
	// whether it fits or not (it was served).
	StatusUnmeteredPending Status = "unmetered-pending"
	// StatusShadowDenied: shadow mode, and the quota would have refused.
	StatusShadowDenied Status = "shadow-denied"
	// StatusRefused: not served, and nothing charged: the quota refused it
	// (429 a *DeniedError, 422 a *quota.TooCostlyError or a Refuse), or the
	// store failed under WithFailClosed (503).
	StatusRefused Status = "refused"
)

// statusValues are the X-Quota-Status values as header map entries,
// shared by every response: slices of one, so an append copies.
var statusValues = map[Status][]string{
	StatusCharged:          {string(StatusCharged)},
	StatusOverage:          {string(StatusOverage)},
	StatusRefunded:         {string(StatusRefunded)},
	StatusRefundPending:    {string(StatusRefundPending)},
	StatusUnmetered:        {string(StatusUnmetered)},
	StatusUnmeteredPending: {string(StatusUnmeteredPending)},
	StatusShadowDenied:     {string(StatusShadowDenied)},
	StatusRefused:          {string(StatusRefused)},
}

func setStatus(h http.Header, s Status) { h[keyStatus] = statusValues[s] }

// Metering is what the gate did for a request, as its handler sees it
// through FromContext.
type Metering struct {
	Identity string
	Plan     quota.Plan
	// Cost is the price charged up front.
	Cost   int64
	Status Status
	// Decision is the store's answer for a charged request; its Receipt
	// names the charge. It is the zero Decision when nothing was charged
	// (unmetered, unmetered-pending, shadow-denied).
	Decision quota.Decision
}

type meteringKey struct{}

// metering is the state of one gated request. It is also the context its
// handler runs in, the request's own with the metering as a value: one
// allocation where context.WithValue would add a second.
type metering struct {
	context.Context // the request's, once the handler runs
	Metering
	gate   *Gate
	w      http.ResponseWriter
	r      *http.Request  // the request as the gate received it, for the observer
	rw     responseWriter // the handler's writer, allocated with the rest
	req    http.Request   // the handler's request, allocated with the rest
	values headerValues   // the first quota headers' values, allocated with the rest

	// onError answers the request's refusals and failures; charge, when
	// set, is the request's own charge (Request.Charge); store, when set,
	// is what it charges in place of the gate's (Request.Hold).
	onError func(http.ResponseWriter, *http.Request, error)
	charge  func(context.Context, Store) (quota.Decision, error)
	store   Store
	// release gives back the request's hold (Request.Hold); nil once
	// called, or for none.
	release func()

	mu       sync.Mutex
	refunded bool
	// owing is the units a request served unmetered owes, charged once its
	// work is done (its slot in the gate's backlog is held); 0 for none.
	owing int64
}

// Value returns the metering for its key, and asks the request's context
// for any other.
func (m *metering) Value(key any) any {
	if key == (meteringKey{}) {
		return m
	}
	return m.Context.Value(key)
}

// String names the context as the context package's own do, so that a
// context printed in a log shows its type, never the request's headers
// (an API key) it holds.
func (m *metering) String() string {
	parent := fmt.Sprintf("%T", m.Context)
	if s, ok := m.Context.(fmt.Stringer); ok {
		parent = s.String()
	}
	return parent + ".WithValue(quotahttp.Metering)"
}

// GoString is String, for %#v.
func (m *metering) GoString() string { return m.String() }

// FromContext returns what the gate did for the request whose context is
// ctx, and false outside a gated handler.
func FromContext(ctx context.Context) (Metering, bool) {
	m, ok := ctx.Value(meteringKey{}).(*metering)
	if !ok {
		return Metering{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Metering, true
}

// ErrNotGated is returned by Settle called outside a gated handler.
var ErrNotGated = errors.New("quotahttp: the request did not pass through a gate")

// Settle lowers the charge of the request whose context is ctx to actual
// units, its real cost as the handler measured it, within [0, the price
// charged]; the rest is given back to every limit. Call it before writing
// the response: it rewrites the quota headers to show the units given back
// and sets X-Quota-Settled-Cost. A request whose charge is pending
// (unmetered-pending) has it lowered, without a call of the store. A
// request charged nothing (unmetered, shadow-denied) has nothing to
// settle: Settle does nothing. A store that fails leaves the request
// charged its price, and Settle returns its error; the observer is told
// either way.
func Settle(ctx context.Context, actual int64) error {
	m, ok := ctx.Value(meteringKey{}).(*metering)
	if !ok {
		return ErrNotGated
	}
	return m.settle(ctx, actual)
}

func (m *metering) settle(ctx context.Context, actual int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owing > 0 {
		if actual < 0 || actual > m.owing {
			return quota.ErrInvalid
		}
		h := m.w.Header()
		if m.owing = actual; actual == 0 {
			m.forgive(h)
		}
		h.Set(HeaderSettledCost, strconv.FormatInt(actual, 10))
		return nil
	}
	rc := m.Decision.Receipt
	if rc.IsZero() || m.refunded {
		return nil
	}
	if actual < 0 || actual > rc.Cost() {
		return quota.ErrInvalid
	}
	e := Event{Kind: EventSettled, Identity: m.Identity, Plan: m.Plan, Cost: m.Cost, Units: rc.Cost() - actual}
	var settled quota.Receipt
	err := m.gate.call(ctx, func(ctx context.Context) error {
		var err error
		settled, _, err = m.gate.store.Settle(ctx, rc, actual)
		return err
	})
	if err != nil {
		e.Kind, e.Units, e.Err = EventSettleFailed, 0, err
		m.gate.observe(m.r, e)
		return err
	}
	e.Overage = rc.Overage() - settled.Overage()
	m.gate.observe(m.r, e)
	m.Decision = given(m.Decision, rc.Cost()-actual)
	m.Decision.Cost = m.Cost // X-RateLimit-Cost stays the price charged up front
	m.Decision.Receipt = settled
	h := m.w.Header()
	m.gate.writeHeaders(h, m.Plan, m.Decision)
	m.Status = chargedStatus(settled) // charged, once settled back within every limit
	setStatus(h, m.Status)
	h.Set(HeaderSettledCost, strconv.FormatInt(actual, 10))
	return nil
}

// refund gives the request's charge back, once, and says so in the
// headers. Should the store not answer in time, the gate goes on trying in
// the background (a refund is idempotent), so a slow store does not keep
// units charged for work never served. A request served unmetered whose
// charge is pending owes nothing any more.
func (m *metering) refund(ctx context.Context) {
	r := m.r
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.w.Header()
	if m.owing > 0 {
		m.forgive(h)
		return
	}
	rc := m.Decision.Receipt
	if rc.IsZero() || m.refunded {
		return
	}
	m.refunded = true
	g := m.gate
	if g.refundOnce(ctx, r, m.Metering) == nil {
		m.Status = StatusRefunded
		g.writeHeaders(h, m.Plan, given(m.Decision, rc.Cost()))
		setStatus(h, StatusRefunded)
		return
	}
	m.Status = StatusRefundPending
	setStatus(h, StatusRefundPending)
	if !g.backlog.reserve() {
		g.observe(r, Event{Kind: EventRefundAbandoned, Identity: m.Identity, Plan: m.Plan, Cost: m.Cost, Err: errPendingFull})
		return
	}
	g.owe(owed{r: detached(r), m: m.Metering, since: time.Now()})
}

// forgive drops the pending charge of a request served unmetered: its
// work failed, or was settled at nothing. m.mu is held.
func (m *metering) forgive(h http.Header) {
	m.owing = 0
	m.gate.backlog.unreserve()
	m.Status = StatusUnmetered
	setStatus(h, StatusUnmetered)
	if _, said := h[keyCost]; said {
		h[keyCost] = []string{"0"}
	}
}

// owe hands the pending charge of a request served unmetered, once its
// work is done, to the gate's backlog.
func (m *metering) owe() {
	m.mu.Lock()
	cost := m.owing
	m.owing = 0
	ms := m.Metering
	m.mu.Unlock()
	if cost == 0 {
		return
	}
	g := m.gate
	g.observe(m.r, Event{Kind: EventChargeQueued, Identity: ms.Identity, Plan: ms.Plan, Cost: ms.Cost, Units: cost})
	g.owe(owed{r: detached(m.r), m: ms, id: g.backlog.newID(), cost: cost, since: time.Now()})
}

// refundOnce makes one attempt at a refund, and returns the store's error:
// nil when the units are back (or were already).
func (g *Gate) refundOnce(ctx context.Context, r *http.Request, m Metering) error {
	rc := m.Decision.Receipt
	var back bool
	err := g.call(ctx, func(ctx context.Context) error {
		var err error
		back, err = g.store.Refund(ctx, rc)
		return err
	})
	e := Event{Kind: EventRefunded, Identity: m.Identity, Plan: m.Plan, Cost: m.Cost, Units: rc.Cost(), Overage: rc.Overage()}
	switch {
	case err != nil:
		e.Kind, e.Units, e.Overage, e.Err = EventRefundFailed, 0, 0, err
	case !back:
		e.Units, e.Overage = 0, 0 // given back already
	}
	g.observe(r, e)
	return err
}

// chargedStatus is the status of a request charged with receipt rc:
// overage when some of it went past a soft limit.
func chargedStatus(rc quota.Receipt) Status {
	if rc.Overage() > 0 {
		return StatusOverage
	}
	return StatusCharged
}

// given is d as it stands once units of its charge are given back.
func given(d quota.Decision, units int64) quota.Decision { return d.Given(units) }

// releaseHold gives back the request's hold, once: called on the
// request's goroutine, by the writer of its last byte or when it is done.
func (m *metering) releaseHold() {
	if release := m.release; release != nil {
		m.release = nil
		release()
	}
}
