package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paulmach/orb"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/tokens"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// caller is who a request is charged to.
type caller struct {
	identity  string // the quota identity (see identity.go)
	plan      plans.Plan
	keyPrefix string   // safe to log; empty for anonymous callers
	key       keys.Key // the key presented; the zero Key for anonymous callers
	// token is what the token presented narrows key to; nil for a key
	// presented itself (see tokens.go).
	token *tokens.Claims
}

// identify resolves the request's API key (X-API-Key, or Authorization:
// Bearer) to its plan; without a key the caller is anonymous, charged by
// client network.
func (s *Server) identify(r *http.Request) (caller, error) {
	secret := presentedKey(r)
	if secret == "" {
		if s.cfg.NoAnonymous {
			return caller{}, errMissingKey
		}
		network, ok := s.clientNetwork(r.Context())
		if !ok {
			return caller{}, errNoClientAddress
		}
		p, _ := s.cfg.Plans.Lookup(plans.Anonymous)
		return caller{identity: anonymousIdentity(network), plan: p}, nil
	}
	if strings.HasPrefix(secret, tokens.Prefix) {
		return s.identifyToken(r, secret)
	}
	prefix := keys.PrefixOf(secret)
	setLogKey(r.Context(), prefix)
	if !keys.Plausible(secret) {
		// A secret of the current form whose checksum is wrong is no
		// key's: refused with no lookup, so it spends none of the
		// network's allowance of unknown keys.
		return caller{}, keys.ErrUnknown
	}
	if keys.Declares(secret, keys.Secret) && r.Header.Get("Origin") != "" {
		return caller{}, errSecretKeyInBrowser
	}
	k, err := s.cfg.Keys.Find(secret)
	if errors.Is(err, keys.ErrNotIndexed) {
		k, err = s.lookupKey(r, secret)
	}
	if err != nil {
		return caller{}, keyRefusal(k, err)
	}
	p, err := s.planOf(k)
	if err != nil {
		return caller{}, err
	}
	return caller{identity: KeyIdentity(k), plan: p, keyPrefix: prefix, key: k}, nil
}

// keyRefusal is err, the refusal of key k, with what its problem tells
// the client: when an expired key expired, when a rotated secret stopped.
func keyRefusal(k keys.Key, err error) error {
	switch {
	case errors.Is(err, keys.ErrExpired):
		return &expiredKeyError{at: k.ExpiresAt}
	case errors.Is(err, keys.ErrRotated):
		return &rotatedKeyError{until: k.PreviousValidUntil}
	}
	return err
}

// planOf is the plan k's requests are charged under: k's plan with k's
// own overrides applied and, for a key of a customer, the customer's plan
// beside it (quota.Plan.Shared, see customerShare), which every charge
// must fit too. It is resolved once for each version of the key and of its
// customer (see keyPlans), when the key index takes either in
// (keys.Index.OnChange), not at every request. Overrides that no longer
// apply (a plans file changed under them) are logged and left out: the
// key keeps its plan. A plan, the key's or its customer's, that this
// server does not configure refuses the key.
func (s *Server) planOf(k keys.Key) (plans.Plan, error) {
	c, err := s.keyCustomer(k)
	if err != nil {
		return plans.Plan{}, err
	}
	v := version{key: k.UpdatedAt, customer: c.UpdatedAt}
	if p, ok := s.keyPlans.get(k.ID, v); ok {
		return p, nil
	}
	p, ok := s.cfg.Plans.Lookup(k.Plan)
	if !ok {
		return plans.Plan{}, &unknownPlanError{plan: k.Plan}
	}
	if k.Overrides != nil {
		o, err := plans.ParseOverrides(k.Overrides)
		if err == nil {
			var with plans.Plan
			if with, err = p.With(o); err == nil {
				p = with
			}
		}
		if err != nil {
			s.log.Error("a key's overrides do not apply to its plan; serving the plan alone", "key", k.Prefix, "err", err)
		}
	}
	if k.CustomerID != 0 {
		if p.Quota, err = s.customerShare(p.Quota, c); err != nil {
			return plans.Plan{}, err
		}
	}
	s.keyPlans.put(k.ID, v, p)
	return p, nil
}

// keyCustomer is k's customer, from the key index; the zero Customer for a
// key without one. The index holds the customer of every key it holds: a
// customer it lacks is a key store that could not be read.
func (s *Server) keyCustomer(k keys.Key) (keys.Customer, error) {
	if k.CustomerID == 0 {
		return keys.Customer{}, nil
	}
	c, ok := s.cfg.Keys.Customer(k.CustomerID)
	if !ok {
		return keys.Customer{}, fmt.Errorf("%w: customer %d of key %s not in the key index", keys.ErrUnavailable, k.CustomerID, k.Prefix)
	}
	return c, nil
}

// customerPlan is the quota plan of customer c (plans.Set.CustomerPlan),
// or an *unknownPlanError if this server does not configure it.
func (s *Server) customerPlan(c keys.Customer) (quota.Plan, error) {
	q, err := s.cfg.Plans.CustomerPlan(c.Plan)
	if err != nil {
		return quota.Plan{}, &unknownPlanError{plan: c.Plan, customer: true}
	}
	return q, nil
}

// customerShare is q, a key's quota plan, with its customer c's plan as a
// shared part (quota.Plan.Shared) that every charge must fit too, all or
// nothing, and is recorded in.
func (s *Server) customerShare(q quota.Plan, c keys.Customer) (quota.Plan, error) {
	cq, err := s.customerPlan(c)
	if err != nil {
		return quota.Plan{}, err
	}
	q.Shared = []quota.Shared{{Identity: CustomerIdentity(c.ID), Plan: cq}}
	return q, nil
}

// keyPlans holds the plan each key resolved to, by key id, for the version
// of the key and of its customer it was resolved for: every change of a
// key's plan, overrides or customer moves its UpdatedAt, and every change
// of a customer's plan moves the customer's. It holds one plan a key the
// server has served, as the key index holds the key.
type keyPlans = byVersion[plans.Plan]

// byVersion holds what the server resolved of each key (its plan, its
// restrictions), by key id, for the version it was resolved for.
type byVersion[T any] struct {
	mu sync.RWMutex
	of map[int64]versioned[T]
}

// version is what a value was resolved from: a key's UpdatedAt and, where
// the value depends on it, its customer's (zero for none).
type version struct{ key, customer time.Time }

func (v version) equal(o version) bool { return v.key.Equal(o.key) && v.customer.Equal(o.customer) }

type versioned[T any] struct {
	version version
	value   T
}

func (c *byVersion[T]) get(id int64, v version) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.of[id]
	return e.value, ok && e.version.equal(v)
}

func (c *byVersion[T]) put(id int64, v version, value T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.of == nil {
		c.of = make(map[int64]versioned[T])
	}
	c.of[id] = versioned[T]{version: v, value: value}
}

// presentedKey is the secret the request presents, or "".
func presentedKey(r *http.Request) string {
	if secret := r.Header.Get("X-API-Key"); secret != "" {
		return secret
	}
	if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}

// lookupKey asks the key store about a key the index does not know, within
// the key time budget and, where the guard is on, within the client
// network's allowance of unknown keys.
func (s *Server) lookupKey(r *http.Request, secret string) (keys.Key, error) {
	ctx := r.Context()
	var t ticket
	if s.unknownKeys != nil {
		// An address whose client network cannot be read is counted with
		// every other such address: never let through unguarded.
		network, ok := s.clientNetwork(ctx)
		if !ok {
			network = "unknown"
		}
		var err error
		if t, err = s.unknownKeys.admit(ctx, network); err != nil {
			// A key made moments ago on another server is not in this
			// index yet: look again, at most once a second, before
			// refusing it.
			lctx, cancel := context.WithTimeout(ctx, s.cfg.KeyTimeout)
			defer cancel()
			if s.cfg.Keys.RefreshIfOlder(lctx, time.Second) == nil {
				if k, ferr := s.cfg.Keys.Find(secret); !errors.Is(ferr, keys.ErrNotIndexed) && !errors.Is(ferr, keys.ErrUnknown) {
					return k, ferr
				}
			}
			s.metrics.unknownKeyBlocks.Inc()
			return keys.Key{}, err
		}
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.KeyTimeout)
	defer cancel()
	k, err := s.cfg.Keys.Lookup(lctx, secret)
	if errors.Is(err, keys.ErrUnavailable) {
		s.log.ErrorContext(ctx, "key lookup failed", "key", keys.PrefixOf(secret), "err", err)
	}
	if t.store != nil && !errors.Is(err, keys.ErrUnknown) {
		s.unknownKeys.refund(ctx, t)
	}
	return k, err
}

// response is the outcome of a request's work, written only once the work
// has succeeded, so a failure can still be refunded and answered cleanly.
type response struct {
	contentType string
	body        []byte
	features    int         // how many features the work returned, for settling
	empty       bool        // a tile rendered with nothing in it: settled to cost.Model.EmptyTile
	sized       int64       // what its bytes cost, where they set its price (cost.Model.GeometryBytes); 0 for none
	header      http.Header // extra headers
	etag        string      // for If-None-Match; empty for none
}

// metered is one gated request: its route (for metrics), its price, what
// would fit when the price is beyond the plan, and the work.
type metered struct {
	route string
	// layer and set name the tile layer or geofence set the request asks
	// of, "" for none.
	layer, set string
	// where is the place the request asks of (a tile's envelope, a query
	// point), nil for none: a token's bbox must meet it.
	where *orb.Bound
	cost  int64
	// overPlan, when set, is why the plan can never admit the request
	// (answered 422 before any charge, or served in shadow mode).
	overPlan error
	// fits adds to a 422 problem what would fit in budget units.
	fits func(p *problem, budget int64)
	// charge, when set, makes the request's charge in place of the
	// store's Charge at cost: the tile path sends its cache lookup along.
	charge func(ctx context.Context, store quotahttp.Store) (quota.Decision, error)
	work   func(ctx context.Context) (*response, error)
}

// gate identifies the caller, has build price its request, checks it
// against the key's restrictions (checkAccess) and meters it through the
// quota gate, which owns every decision from there: the
// refusal of what no plan admits, the caller's in-flight slot, the charge
// within the time budget, the failure policy, shadow mode, the headers,
// and the refund of work that fails. A denied request is never charged.
// An error from build is answered before any of that.
func (s *Server) gate(w http.ResponseWriter, r *http.Request, build func(caller) (metered, error)) {
	c, err := s.identify(r)
	if err != nil {
		if errors.As(err, new(*tooManyUnknownKeysError)) {
			// Every 429 of a metered route says how it was metered: this
			// one, by the client network's allowance of unknown keys.
			w.Header()[quotahttp.HeaderStatus] = []string{string(quotahttp.StatusRefused)}
		}
		s.fail(w, r, err)
		return
	}
	m, err := build(c)
	if err == nil {
		// The key's restrictions, then a token's narrowing, once the
		// request is priced and named, and before any charge: a refusal
		// is never charged.
		err = s.checkAccess(r, c, accessRoute(m), m.layer, m.set)
		if err == nil {
			err = c.tokenAllows(m)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.serve(w, r, c, m)
}

// serve meters m, the request of c, through the quota gate and runs its
// work.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c caller, m metered) {
	req := quotahttp.Request{
		Identity: c.identity, Plan: c.plan.Quota, Cost: m.cost,
		Hold:   s.inFlightHold(c),
		Charge: m.charge,
		OnError: func(w http.ResponseWriter, r *http.Request, err error) {
			if held := (*quota.SlotsHeldError)(nil); errors.As(err, &held) {
				err = &concurrencyError{plan: c.plan, held: held}
			}
			s.failMetered(w, r, m, err)
		},
	}
	if m.overPlan != nil {
		req.Refusal = quotahttp.Refuse(m.overPlan)
	}
	s.meterUsage(w, r, c, m, func(w http.ResponseWriter, r *http.Request) {
		s.meter.ServeRequest(w, r, req, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.alert(r.Context(), c)
			s.runWork(w, r, c, m)
		}))
	})
}

// newGate is the quota gate of every metered route and of /v1/quota. It
// charges store within the quota time budget, applies the failure policy
// and shadow mode, and refunds work that fails.
func (s *Server) newGate(store quotahttp.Store) *quotahttp.Gate {
	opts := []quotahttp.Option{
		quotahttp.WithTimeout(s.cfg.QuotaTimeout),
		// Input is checked before the charge, so any error after it is a
		// failure of ours: the client gets nothing for its units.
		quotahttp.WithRefundIf(func(status int) bool { return status >= 400 }),
		quotahttp.WithErrorHandler(s.fail),
		quotahttp.WithObserver(s.observe),
	}
	if s.cfg.FailClosed {
		opts = append(opts, quotahttp.WithFailClosed())
	}
	if s.cfg.Shadow {
		opts = append(opts, quotahttp.WithShadow())
	}
	if s.cfg.QuotaMaxWait > 0 {
		opts = append(opts, quotahttp.WithMaxWait(s.cfg.QuotaMaxWait))
	}
	return quotahttp.New(store, opts...)
}

// observe turns what the gate did into metrics, logs and usage history.
func (s *Server) observe(r *http.Request, e quotahttp.Event) {
	s.observeUsage(r, e)
	plan := e.Plan.Name
	ctx := r.Context()
	switch e.Kind {
	case quotahttp.EventAllowed, quotahttp.EventDenied:
		s.metrics.quotaLatency.Observe(e.Latency.Seconds())
		if b := e.Decision.BindingLimit(); b.Remaining*10 < b.Limit.Max {
			s.metrics.nearLimit.WithLabelValues(plan).Inc()
		}
		if e.Kind == quotahttp.EventDenied {
			s.metrics.decisions.WithLabelValues(plan, "denied").Inc()
			return
		}
		s.metrics.decisions.WithLabelValues(plan, "allowed").Inc()
		s.metrics.unitsCharged.WithLabelValues(plan).Add(float64(e.Cost))
	case quotahttp.EventTooCostly:
		s.metrics.decisions.WithLabelValues(plan, "too_costly").Inc()
	case quotahttp.EventSlotsHeld:
		s.metrics.decisions.WithLabelValues(plan, "in_flight_exceeded").Inc()
	case quotahttp.EventStoreFailed:
		s.metrics.quotaLatency.Observe(e.Latency.Seconds())
		s.metrics.redisErrors.Inc()
		s.log.ErrorContext(ctx, "quota store failed", "err", e.Err, "fail_closed", s.cfg.FailClosed)
		if !s.cfg.FailClosed {
			s.metrics.failOpen.Inc()
		}
	case quotahttp.EventLateRetried:
		s.metrics.lateRetries.Inc()
	case quotahttp.EventRefunded, quotahttp.EventSettled:
		if e.Units > 0 {
			s.metrics.unitsRefunded.WithLabelValues(plan).Add(float64(e.Units))
		}
	case quotahttp.EventRefundFailed:
		s.metrics.redisErrors.Inc()
		s.log.ErrorContext(ctx, "refund failed; retrying in the background", "err", e.Err)
	case quotahttp.EventRefundAbandoned:
		s.log.ErrorContext(ctx, "refund given up: units stay charged", "cost", e.Cost, "err", e.Err)
	case quotahttp.EventSettleFailed:
		s.metrics.redisErrors.Inc()
		s.log.ErrorContext(ctx, "settle failed; the request stays charged its price", "err", e.Err)
	case quotahttp.EventChargeQueued:
		s.metrics.pendingCharges.WithLabelValues("queued").Inc()
	case quotahttp.EventChargeApplied:
		s.metrics.pendingCharges.WithLabelValues("applied").Inc()
		if e.Units > 0 {
			s.metrics.unitsCharged.WithLabelValues(plan).Add(float64(e.Units))
		}
	case quotahttp.EventChargeRetryFailed:
		s.metrics.redisErrors.Inc()
		s.log.WarnContext(ctx, "pending charge failed; retrying in the background", "err", e.Err)
	case quotahttp.EventChargeDropped:
		s.metrics.pendingCharges.WithLabelValues("dropped").Inc()
		s.log.ErrorContext(ctx, "pending charge dropped: a request served unmetered is never charged", "units", e.Units, "err", e.Err)
	}
}

// inFlightHold is the hold of one of c's in-flight slots while its
// request runs, if its plan limits them: taken with the request's charge
// (refused, a *quota.SlotsHeldError, when all are held), renewed while the
// request runs, given back without waiting once it is done.
func (s *Server) inFlightHold(c caller) func(quotahttp.Store) (quotahttp.Store, func()) {
	if s.inFlight == nil || c.plan.MaxInFlight == 0 {
		return nil
	}
	return func(store quotahttp.Store) (quotahttp.Store, func()) {
		h := s.inFlight.Hold(store, c.identity, c.plan.MaxInFlight)
		return h, s.renewing(h)
	}
}

// renewing renews h's lease, once a charge has taken it, while the
// request runs (a slow query must not lose its slot), and returns the
// release the gate calls once the request is done: it stops the renewing
// and gives the slot back (in the background: inflight.Held.Release). A
// renewal still out then is harmless: an ended lease is never renewed.
func (s *Server) renewing(h *inflight.Held) func() {
	every := s.inFlight.Lease() / 3
	if every <= 0 {
		return h.Release
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if l := h.Lease(); !l.IsZero() {
					if _, err := s.inFlight.Renew(context.Background(), l); err != nil {
						s.quotaStoreFailed(context.Background(), err)
					}
				}
			}
		}
	}()
	return func() {
		close(done)
		h.Release()
	}
}

// runWork runs the request's work and writes the response. An error is
// answered as its problem, and the gate refunds the charge as the status
// goes out; a success settles the charge on the work done, where the plan
// prices work.
func (s *Server) runWork(w http.ResponseWriter, r *http.Request, c caller, m metered) {
	start := time.Now()
	resp, err := m.work(r.Context())
	took := time.Since(start)
	s.metrics.queryLatency.WithLabelValues(m.route).Observe(took.Seconds())
	if err != nil {
		s.failMetered(w, r, m, err)
		return
	}
	h := w.Header()
	s.settle(r, h, c, took, resp)
	for k, v := range resp.header {
		h[k] = v
	}
	h.Set("Content-Type", resp.contentType)
	if resp.etag != "" {
		h.Set("ETag", resp.etag)
		if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, resp.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	body := resp.body
	// An answer with an ETag (a tile) is gzipped once and kept, rather
	// than at every request by the compression middleware, which lets an
	// answer with its Content-Encoding set pass.
	if resp.etag != "" && len(body) > 0 {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			if gz := s.gzipped.encode(resp.etag, body); gz != nil {
				h.Set("Content-Encoding", "gzip")
				body = gz
			}
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// settle lowers an admitted charge to the price of what the work did: an
// empty tile to cost.Model.EmptyTile, an answer priced by its size to what
// its bytes cost, and that or anything else to the price of the work
// measured, if the plan prices work (cost.Model.Settle).
// X-RateLimit-Cost stays the price charged up front, X-Quota-Settled-Cost
// is what the request costs in the end, and RateLimit shows the units
// given back.
func (s *Server) settle(r *http.Request, h http.Header, c caller, took time.Duration, resp *response) {
	g, _ := quotahttp.FromContext(r.Context())
	charged := g.Decision.Receipt.Cost()
	if g.Status == quotahttp.StatusUnmeteredPending {
		charged = g.Cost // owed, and charged once Redis answers
	}
	var price int64
	switch {
	case charged == 0:
		return
	case resp.empty:
		price = min(charged, c.plan.Cost.EmptyTile())
	case resp.sized > 0 || c.plan.Cost.Settle != nil:
		price = charged
		if resp.sized > 0 {
			price = min(price, resp.sized)
		}
		price = c.plan.Cost.Work(price, float64(took.Microseconds())/1000, resp.features)
	default:
		return
	}
	if price < charged && quotahttp.Settle(r.Context(), price) == nil {
		return
	}
	// Nothing to give back, or a store that failed to: the price stands.
	h.Set(quotahttp.HeaderSettledCost, strconv.FormatInt(charged, 10))
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// X-Quota-Status says how a response was metered (see quotahttp.Status).
const (
	headerStatus        = quotahttp.HeaderStatus
	statusCharged       = string(quotahttp.StatusCharged)
	statusRefunded      = string(quotahttp.StatusRefunded)
	statusRefundPending = string(quotahttp.StatusRefundPending)
	statusUnmetered     = string(quotahttp.StatusUnmetered)
	statusPending       = string(quotahttp.StatusUnmeteredPending)
	statusShadowDenied  = string(quotahttp.StatusShadowDenied)
	statusRefused       = string(quotahttp.StatusRefused)
	headerSettledCost   = quotahttp.HeaderSettledCost
)
