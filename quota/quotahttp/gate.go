package quotahttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// Store is what a gate charges: a *quota.Redis, a *quota.Memory or a
// *quota.DenyCache in front of either.
type Store interface {
	Charge(ctx context.Context, identity string, plan quota.Plan, cost int64) (quota.Decision, error)
	Peek(ctx context.Context, identity string, plan quota.Plan) (quota.Decision, error)
	Refund(ctx context.Context, rc quota.Receipt) (bool, error)
	Settle(ctx context.Context, rc quota.Receipt, actual int64) (quota.Receipt, bool, error)
}

var (
	_ Store = (*quota.Redis)(nil)
	_ Store = (*quota.Memory)(nil)
	_ Store = (*quota.DenyCache)(nil)
)

// DefaultTimeout is the time budget of each call of the store unless
// WithTimeout sets another.
const DefaultTimeout = 50 * time.Millisecond

// Gate meters the requests of the handlers it wraps. It is safe for
// concurrent use; make one and wrap any number of handlers with it.
type Gate struct {
	store      Store
	inProcess  bool // the store does no I/O (quota.Memory.InProcess)
	identify   func(*http.Request) (string, error)
	plan       func(*http.Request, string) (quota.Plan, error)
	price      func(*http.Request) (int64, error)
	timeout    time.Duration
	failClosed bool
	shadow     bool
	headers    Headers
	refundIf   func(status int) bool
	onError    func(http.ResponseWriter, *http.Request, error)
	observe    func(*http.Request, Event)
	observed   bool // an observer was given
	// overdraft charges the requests served unmetered once the store
	// answers again; nil when the store cannot (then they are forgotten).
	overdraft overdrafter
	backlog   *backlog // what the gate owes the store
	policies  policyCache
	// waits holds the requests waiting their turn (WithMaxWait); nil when
	// none may wait.
	maxWait                   time.Duration
	maxWaiters, maxWaitersPer int
	waits                     *waiters
}

// writeHeaders writes the quota headers of d, a decision under plan.
func (g *Gate) writeHeaders(h http.Header, plan quota.Plan, d quota.Decision) {
	if len(d.Limits) == 0 {
		return
	}
	g.headers.write(h, d, g.policies.policy(plan, d), nil)
}

// New returns a gate that charges store. Its options have defaults:
// callers identified by client address, every request costing one unit, a
// 50ms budget, failing open, owing the store at most DefaultPendingLimit
// refunds and charges. Handler and Usage need a plan (WithPlan or
// WithPlanFunc); ServeRequest and ServeUsage are told each request's.
// New panics if store is nil: a programming error.
func New(store Store, opts ...Option) *Gate {
	if store == nil {
		panic("quotahttp: New: nil store")
	}
	g := &Gate{
		store:    store,
		identify: ClientAddress,
		price:    func(*http.Request) (int64, error) { return 1, nil },
		timeout:  DefaultTimeout,
		headers:  AllHeaders,
		refundIf: RefundFailures,
		onError:  WriteProblem,
		observe:  func(*http.Request, Event) {},
		backlog:  newBacklog(DefaultPendingLimit),
		// Waiting is off until WithMaxWait; these are its caps.
		maxWaiters:    DefaultMaxWaiters,
		maxWaitersPer: DefaultMaxWaitersPerIdentity,
	}
	g.overdraft, _ = store.(overdrafter)
	if local, ok := store.(interface{ InProcess() bool }); ok {
		g.inProcess = local.InProcess()
	}
	for _, o := range opts {
		o(g)
	}
	if g.maxWait > 0 && !g.shadow {
		g.waits = newWaiters(g.maxWait, g.maxWaiters, g.maxWaitersPer)
	}
	if g.observe == nil {
		g.observe = func(*http.Request, Event) {}
	}
	return g
}

// Limit returns middleware that charges each request cost units (see
// WithCost; one by default) to its caller under plan: the shape of
// go-chi/httprate's Limit, for routers that take func(http.Handler)
// http.Handler.
func Limit(store Store, plan quota.Plan, opts ...Option) func(http.Handler) http.Handler {
	return New(store, append([]Option{WithPlan(plan)}, opts...)...).Handler
}

// Handler returns next gated: it runs only for requests the quota admits
// (or, failing open or in shadow mode, serves unmetered).
func (g *Gate) Handler(next http.Handler) http.Handler {
	g.mustHavePlan("Handler")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, next) })
}

// mustHavePlan panics, a programming error, unless the gate was given a
// way to find a caller's plan.
func (g *Gate) mustHavePlan(use string) {
	if g.plan == nil {
		panic("quotahttp: Gate." + use + ": no plan: give New WithPlan or WithPlanFunc, or serve with ServeRequest")
	}
}

// ClientAddress identifies a caller by the host of r.RemoteAddr, the TCP
// peer. Behind a proxy that is the proxy: identify by an API key or by a
// forwarded address the service trusts instead.
func ClientAddress(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return "", errNoAddress
	}
	return host, nil
}

var errNoAddress = statusError{status: http.StatusBadRequest, msg: "quotahttp: the client address could not be read"}

// RefundFailures is the default refund rule: a charge is given back when
// the handler answers 5xx (it failed) or 499 (the client went away before
// the answer, as nginx logs it).
func RefundFailures(status int) bool { return status >= 500 || status == 499 }

// caller names the request's caller and finds its plan.
func (g *Gate) caller(r *http.Request) (string, quota.Plan, error) {
	identity, err := g.identify(r)
	if err != nil {
		return "", quota.Plan{}, err
	}
	plan, err := g.plan(r, identity)
	return identity, plan, err
}

// serve identifies and prices the request with the gate's options, then
// meters it as ServeRequest does.
func (g *Gate) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	identity, plan, err := g.caller(r)
	if err != nil {
		g.onError(w, r, err)
		return
	}
	req := Request{Identity: identity, Plan: plan}
	if req.Cost, err = g.price(r); err != nil {
		if refused := (*RefusedError)(nil); !errors.As(err, &refused) {
			g.onError(w, r, err)
			return
		}
		req.Refusal = err
	}
	g.ServeRequest(w, r, req, next)
}

// Request is a request as the service that meters it has decided it: who
// pays, under which plan, at what price. A service that identifies and
// prices requests itself hands each to ServeRequest; Handler decides the
// same with the gate's WithIdentity, WithPlan and WithCost.
type Request struct {
	Identity string
	Plan     quota.Plan
	// Cost is the price, charged before the work.
	Cost int64
	// Refusal, when set, is why the request is refused before any charge
	// (no plan admits it: a radius beyond the plan's, say); its error
	// handler answers it, or it is served unmetered in shadow mode.
	// Refuse makes one.
	Refusal error
	// Hold, when set, takes what the request holds while it runs, such as
	// one of its caller's in-flight slots, with its charge: given the
	// gate's store, it returns the store to charge in its place, whose
	// charge takes the hold only if admitted and is made only if the hold
	// is free (inflight.Redis.Hold does both in the charge's own script,
	// one round trip), and release, which the gate calls once the request
	// is done, before its response's last byte goes out (a client that
	// waits for its answer finds its hold given back: see
	// responseWriter). release must not wait for
	// I/O: the client would wait for it (inflight's sends the release in
	// the background). A charge refused for its hold returns an error
	// matching quota.ErrSlotsHeld, which refuses the request; any other
	// error is the store's, for the failure policy (served without the
	// hold when failing open). A request refused before its charge
	// (Refusal) takes no hold.
	Hold func(store Store) (holding Store, release func())
	// Charge, when set, makes the charge in place of the store's Charge
	// at Cost, within the gate's budget, given the gate's store: for a
	// service that sends other commands in the charge's round trip, such
	// as a cache lookup (see quota.Redis.ChargeWith). One that returns an
	// error matching quota.ErrLate is called again, each time on a budget
	// of its own, up to three tries: it must be safe to call more than
	// once.
	Charge func(ctx context.Context, store Store) (quota.Decision, error)
	// OnError, when set, answers this request's refusals and failures in
	// place of the gate's error handler (WithErrorHandler).
	OnError func(w http.ResponseWriter, r *http.Request, err error)
}

// ServeRequest meters req and serves it with next, or refuses it: the
// refusal, hold, charge, failure policy, headers and refund of Handler,
// for a request the service has identified and priced itself.
func (g *Gate) ServeRequest(w http.ResponseWriter, r *http.Request, req Request, next http.Handler) {
	m := &metering{gate: g, w: w, r: r, Metering: Metering{Identity: req.Identity, Plan: req.Plan, Cost: req.Cost},
		onError: g.onError, charge: req.Charge}
	if req.OnError != nil {
		m.onError = req.OnError
	}
	if req.Refusal != nil {
		g.refuse(w, r, next, m, req.Refusal) // in shadow mode: served, shadow-denied
		return
	}
	if req.Hold != nil {
		m.store, m.release = req.Hold(g.store)
		defer m.releaseHold()
	}
	identity, plan := req.Identity, req.Plan
	var start time.Time
	if g.observed {
		start = time.Now() // the clock is read only for an observer
	}
	d, waited, err := g.admit(r, m)
	if waited > 0 && err != nil && r.Context().Err() != nil {
		m.onError(w, r, err) // gone while it waited its turn: nothing charged
		return
	}
	if err == nil && d.Allowed {
		if g.observed {
			g.observe(r, Event{Kind: EventAllowed, Identity: identity, Plan: plan, Cost: m.Cost, Decision: d, Latency: time.Since(start) - waited, Waited: waited})
		}
		m.Status, m.Decision = chargedStatus(d.Receipt), d
		g.headers.write(w.Header(), d, g.policies.policy(plan, d), &m.values)
		setStatus(w.Header(), m.Status)
		g.run(w, r, next, m)
		return
	}

	e := Event{Identity: identity, Plan: plan, Cost: m.Cost, Decision: d, Err: err, Waited: waited}
	if g.observed {
		e.Latency = time.Since(start) - waited
	}
	switch {
	case errors.Is(err, quota.ErrTooCostly):
		e.Kind = EventTooCostly
		g.observe(r, e)
		g.refuse(w, r, next, m, err) // a *quota.TooCostlyError
	case errors.Is(err, quota.ErrSlotsHeld):
		e.Kind = EventSlotsHeld
		g.observe(r, e)
		g.refuse(w, r, next, m, err) // the hold's: nothing charged
	case errors.Is(err, quota.ErrInvalid):
		// A price out of range or a malformed plan: a bug of the service,
		// never an outage to serve unmetered.
		e.Kind = EventInvalid
		g.observe(r, e)
		m.onError(w, r, err)
	case err != nil:
		e.Kind = EventStoreFailed
		g.observe(r, e)
		if g.failClosed {
			setStatus(w.Header(), StatusRefused)
			m.onError(w, r, &UnavailableError{Err: err})
			return
		}
		m.Status = StatusUnmetered
		if g.overdraft != nil {
			if g.backlog.reserve() {
				// Served now, charged once the store answers again: the
				// price owed is said where the decision's would be.
				m.Status, m.owing = StatusUnmeteredPending, m.Cost
				if g.headers&HeadersX != 0 {
					w.Header()[keyCost] = []string{strconv.FormatInt(m.Cost, 10)}
				}
			} else {
				e.Kind, e.Units, e.Err = EventChargeDropped, m.Cost, errPendingFull
				g.observe(r, e)
			}
		}
		setStatus(w.Header(), m.Status)
		g.run(w, r, next, m)
	default: // denied
		e.Kind = EventDenied
		g.observe(r, e)
		g.writeHeaders(w.Header(), plan, d)
		g.refuse(w, r, next, m, &DeniedError{Identity: identity, Plan: plan, Cost: m.Cost, Decision: d})
	}
}

// refuse answers a request the quota does not admit with err, saying it
// was refused, or, in shadow mode, serves it unmetered, saying so.
func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, next http.Handler, m *metering, err error) {
	if !g.shadow {
		setStatus(w.Header(), StatusRefused)
		if g.headers&HeaderRetryAfter != 0 {
			if after, ok := retryAfter(err); ok {
				w.Header().Set("Retry-After", formatSeconds(after))
			}
		}
		m.onError(w, r, err)
		return
	}
	m.Status = StatusShadowDenied
	setStatus(w.Header(), StatusShadowDenied)
	g.run(w, r, next, m)
}

// run serves the request with next, the metering in its context, and
// refunds the charge if the handler fails: a refunded status, a panic, or
// a client gone before the work began. A request served unmetered owes
// its charge once its work is done, unless that failed.
func (g *Gate) run(w http.ResponseWriter, r *http.Request, next http.Handler, m *metering) {
	m.Context = r.Context() // m is the handler's context: see metering.Value
	ctx := context.Context(m)
	if m.owing > 0 {
		defer m.owe()
	}
	if err := ctx.Err(); err != nil {
		m.refund(ctx)
		m.onError(w, r, err)
		return
	}
	rw := &m.rw
	rw.ResponseWriter, rw.m = w, m
	defer func() {
		if p := recover(); p != nil {
			m.refund(ctx)
			panic(p)
		}
	}()
	// The handler's request is kept in m too: WithContext's copy is made on
	// the stack and copied in, one allocation fewer a request.
	m.req = *r.WithContext(ctx)
	next.ServeHTTP(rw, &m.req)
	if !rw.wrote && ctx.Err() != nil {
		// The handler gave up on a client that went away, and answered
		// nothing: it served nothing.
		m.refund(ctx)
	}
}

// charge charges m's request within the time budget: with its own charge,
// if it has one, and to its hold's store, if it has one. A store in
// process (quota.Memory, or a deny cache in front of one) answers without
// I/O, so it is spared the budget's timer.
func (g *Gate) charge(ctx context.Context, m *metering) (quota.Decision, error) {
	charge, store := m.charge, m.store
	if charge == nil {
		charge = func(ctx context.Context, store Store) (quota.Decision, error) {
			return store.Charge(ctx, m.Identity, m.Plan, m.Cost)
		}
	}
	if store == nil {
		store = g.store
	}
	if g.inProcess {
		return charge(ctx, store)
	}
	d, err := g.within(ctx, store, charge)
	// Redis answered within the budget, but had the charge too late to
	// make it (it made nothing): Redis is alive, and the time went to
	// reaching it, as on a machine busy to saturation. The charge is tried
	// again, on a budget of its own, up to lateTries in all; a Redis that
	// does not answer is still given one budget, since a charge it never
	// answers is never late.
	for try := 1; try < lateTries && errors.Is(err, quota.ErrLate) && ctx.Err() == nil; try++ {
		g.observe(m.r, Event{Kind: EventLateRetried, Identity: m.Identity, Plan: m.Plan, Cost: m.Cost, Err: err})
		d, err = g.within(ctx, store, charge)
	}
	return d, err
}

// lateTries is how many times a charge is tried while Redis answers that
// it came too late to be made.
const lateTries = 3

// within runs charge on store within the time budget.
func (g *Gate) within(ctx context.Context, store Store, charge func(context.Context, Store) (quota.Decision, error)) (quota.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return charge(ctx, store)
}

// call runs f within the time budget, on a context that outlives the
// request's: a refund or settlement must be made whatever happened to
// the client.
func (g *Gate) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
	defer cancel()
	return f(ctx)
}

// responseWriter refunds the charge when the handler answers a status the
// refund rule names, before the status goes out, so the headers can say so.
//
// It also gives the request's hold back (Request.Hold) before the last
// byte of a body of known length goes out: a large body leaves as it is
// written, and a client that has it all may send its next request before
// the handler returns.
type responseWriter struct {
	http.ResponseWriter
	m     *metering
	wrote bool
	left  int64 // the bytes of the body still to write; -1 unknown
}

func (w *responseWriter) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		if w.m.gate.refundIf(status) {
			w.m.refund(w.m.r.Context())
		}
		w.left = -1
		if n, err := strconv.ParseInt(w.Header().Get("Content-Length"), 10, 64); err == nil {
			w.left = n
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.left >= 0 {
		if w.left -= int64(len(b)); w.left <= 0 {
			w.m.releaseHold()
		}
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer's Flush, Hijack
// and deadlines.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on, for handlers that stream.
func (w *responseWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Usage returns a handler that shows callers their usage without charging
// anything: it identifies the caller and finds its plan as the gate does,
// then serves as ServeUsage.
func (g *Gate) Usage(show func(w http.ResponseWriter, r *http.Request, d quota.Decision)) http.Handler {
	g.mustHavePlan("Usage")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		identity, plan, err := g.caller(r)
		if err != nil {
			g.onError(w, r, err)
			return
		}
		g.ServeUsage(w, r, identity, plan, show)
	})
}

// ServeUsage peeks at identity's usage under plan within the time budget,
// charging nothing, writes the quota headers and calls show with the
// decision. A store that fails is answered as an *UnavailableError: there
// is nothing to serve unmetered.
func (g *Gate) ServeUsage(w http.ResponseWriter, r *http.Request, identity string, plan quota.Plan, show func(w http.ResponseWriter, r *http.Request, d quota.Decision)) {
	var d quota.Decision
	err := g.call(r.Context(), func(ctx context.Context) error {
		var err error
		d, err = g.store.Peek(ctx, identity, plan)
		return err
	})
	switch {
	case errors.Is(err, quota.ErrInvalid):
		g.onError(w, r, err)
		return
	case err != nil:
		g.observe(r, Event{Kind: EventStoreFailed, Identity: identity, Plan: plan, Err: err})
		g.onError(w, r, &UnavailableError{Err: err})
		return
	}
	g.writeHeaders(w.Header(), plan, d)
	show(w, r, d)
}
