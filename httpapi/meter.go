package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/tileapi/tileapi/inflight"
	"github.com/tileapi/tileapi/keys"
	"github.com/tileapi/tileapi/plans"
	"github.com/tileapi/tileapi/quota"
)

// caller is who a request is charged to.
type caller struct {
	identity  string // the quota identity (see identity.go)
	plan      plans.Plan
	keyPrefix string // safe to log; empty for anonymous callers
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
		network, ok := clientNetwork(middleware.GetClientIP(r.Context()))
		if !ok {
			return caller{}, errNoClientAddress
		}
		p, _ := s.cfg.Plans.Lookup(plans.Anonymous)
		return caller{identity: anonymousIdentity(network), plan: p}, nil
	}
	prefix := keys.PrefixOf(secret)
	setLogKey(r.Context(), prefix)
	k, err := s.cfg.Keys.Find(secret)
	if errors.Is(err, keys.ErrNotIndexed) {
		k, err = s.lookupKey(r, secret)
	}
	if err != nil {
		return caller{}, err
	}
	p, err := s.planOf(k)
	if err != nil {
		return caller{}, err
	}
	return caller{identity: KeyIdentity(k.ID), plan: p, keyPrefix: prefix}, nil
}

// planOf is k's plan with k's own overrides applied. Overrides that no
// longer apply (a plans file changed under them) are logged and left out:
// the key keeps its plan.
func (s *Server) planOf(k keys.Key) (plans.Plan, error) {
	p, ok := s.cfg.Plans.Lookup(k.Plan)
	if !ok {
		return plans.Plan{}, &unknownPlanError{plan: k.Plan}
	}
	if k.Overrides == nil {
		return p, nil
	}
	o, err := plans.ParseOverrides(k.Overrides)
	if err == nil {
		var with plans.Plan
		if with, err = p.With(o); err == nil {
			return with, nil
		}
	}
	s.log.Error("a key's overrides do not apply to its plan; serving the plan alone", "key", k.Prefix, "err", err)
	return p, nil
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
		network, ok := clientNetwork(middleware.GetClientIP(ctx))
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
	header      http.Header // extra headers
	etag        string      // for If-None-Match; empty for none
}

// metered is one gated request: its route (for metrics), its price, what
// would fit when the price is beyond the plan, and the work.
type metered struct {
	route string
	cost  int64
	// overPlan, when set, is why the plan can never admit the request
	// (answered 422 before any charge, or served in shadow mode).
	overPlan error
	// fits adds to a 422 problem what would fit in budget units.
	fits func(p *problem, budget int64)
	work func(ctx context.Context) (*response, error)
}

// serve charges the caller, runs the work and writes its response, with the
// quota headers on every outcome. A denied request is never charged; a
// request whose work fails after the charge is refunded. In shadow mode
// every decision is made and reported, and nothing is refused.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c caller, m metered) {
	if m.overPlan != nil {
		s.shadowOr(w, r, c, m, m.overPlan)
		return
	}
	lease, err := s.acquire(r.Context(), c)
	var busy *concurrencyError
	switch {
	case errors.As(err, &busy):
		s.metrics.decisions.WithLabelValues(c.plan.Name, "in_flight_exceeded").Inc()
		s.shadowOr(w, r, c, m, err)
		return
	case err != nil && (s.cfg.FailClosed || !isStoreFailure(err)):
		s.fail(w, r, err)
		return
	}
	defer s.release(r.Context(), lease)()

	start := time.Now()
	d, err := s.quota.Charge(r.Context(), c.identity, c.plan.Quota, m.cost)
	s.metrics.quotaLatency.Observe(time.Since(start).Seconds())

	var tooCostly *quota.TooCostlyError
	switch {
	case errors.As(err, &tooCostly):
		s.metrics.decisions.WithLabelValues(c.plan.Name, "too_costly").Inc()
		s.shadowOr(w, r, c, m, &overPlanError{plan: c.plan, cost: m.cost, limit: tooCostly.Limit, fits: m.fits})
		return
	case err != nil && !isStoreFailure(err):
		// A charge the quota refuses as invalid is a bug of ours (a price
		// out of range), never an outage to serve unmetered.
		s.fail(w, r, err)
		return
	case err != nil:
		s.metrics.redisErrors.Inc()
		s.log.ErrorContext(r.Context(), "quota store failed", "err", err, "fail_closed", s.cfg.FailClosed)
		if s.cfg.FailClosed {
			s.fail(w, r, err)
			return
		}
		s.metrics.failOpen.Inc()
		w.Header().Set(headerStatus, statusUnmetered)
		s.work(w, r, c, m, quota.Decision{})
		return
	}

	setQuotaHeaders(w.Header(), d)
	if d.BindingLimit().Remaining*10 < d.BindingLimit().Limit.Max {
		s.metrics.nearLimit.WithLabelValues(c.plan.Name).Inc()
	}
	if !d.Allowed {
		s.metrics.decisions.WithLabelValues(c.plan.Name, "denied").Inc()
		s.shadowOr(w, r, c, m, &deniedError{plan: c.plan, cost: m.cost, decision: d})
		return
	}
	s.metrics.decisions.WithLabelValues(c.plan.Name, "allowed").Inc()
	s.metrics.unitsCharged.WithLabelValues(c.plan.Name).Add(float64(m.cost))
	w.Header().Set(headerStatus, statusCharged)
	s.work(w, r, c, m, d)
}

// acquire takes one of the caller's in-flight slots, if its plan limits
// them: a *concurrencyError when all are held, a *quotaUnavailableError
// when the store fails (the caller then applies the failure policy).
func (s *Server) acquire(ctx context.Context, c caller) (inflight.Lease, error) {
	if s.inFlight == nil || c.plan.MaxInFlight == 0 {
		return inflight.Lease{}, nil
	}
	l, denial, err := s.inFlight.Acquire(ctx, c.identity, c.plan.MaxInFlight)
	switch {
	case err != nil:
		s.quotaStoreFailed(ctx, err)
		return inflight.Lease{}, err
	case denial != nil:
		return inflight.Lease{}, &concurrencyError{plan: c.plan, denial: denial}
	}
	return l, nil
}

// release renews the lease while the request runs (a slow query must not
// lose its slot) and returns the function that stops that and gives the
// slot back.
func (s *Server) release(ctx context.Context, l inflight.Lease) func() {
	if l.IsZero() {
		return func() {}
	}
	done := make(chan struct{})
	var renewing sync.WaitGroup
	if every := s.inFlight.Lease() / 3; every > 0 {
		renewing.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if _, err := s.inFlight.Renew(ctx, l); err != nil {
						s.quotaStoreFailed(ctx, err)
					}
				}
			}
		})
	}
	return func() {
		close(done)
		renewing.Wait()
		if err := s.inFlight.Release(ctx, l); err != nil {
			s.quotaStoreFailed(ctx, err)
		}
	}
}

// isStoreFailure reports a failure of Redis, where the failure policy
// decides, as opposed to a call the store refused.
func isStoreFailure(err error) bool {
	var down *quotaUnavailableError
	return errors.As(err, &down)
}

// shadowOr refuses a request the quota does not admit with err, or in
// shadow mode serves it unmetered, saying so.
func (s *Server) shadowOr(w http.ResponseWriter, r *http.Request, c caller, m metered, err error) {
	if !s.cfg.Shadow {
		s.fail(w, r, err)
		return
	}
	w.Header().Set(headerStatus, statusShadowDenied)
	s.work(w, r, c, m, quota.Decision{})
}

// work runs the request's work and writes the response; if the work fails,
// the charge of d (if any) is refunded before the error is answered, and
// the headers say so.
func (s *Server) work(w http.ResponseWriter, r *http.Request, c caller, m metered, d quota.Decision) {
	start := time.Now()
	resp, err := m.work(r.Context())
	took := time.Since(start)
	s.metrics.queryLatency.WithLabelValues(m.route).Observe(took.Seconds())
	if err != nil {
		// Whatever went wrong, the client gets nothing for its units.
		if s.refund(r.Context(), c, d.Receipt) {
			w.Header().Set(headerStatus, statusRefunded)
			setQuotaHeaders(w.Header(), given(d, d.Cost))
		}
		s.fail(w, r, err)
		return
	}
	s.settle(r.Context(), w.Header(), c, d, took, resp.features)
	h := w.Header()
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
	h.Set("Content-Length", strconv.Itoa(len(resp.body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp.body)
}

// refund gives back a charge whose work failed, and reports whether it
// did. It runs even if the client has gone, within its own time budget.
func (s *Server) refund(ctx context.Context, c caller, rc quota.Receipt) bool {
	if rc.IsZero() {
		return false
	}
	ok, err := s.quota.Refund(ctx, rc)
	switch {
	case err != nil:
		s.metrics.redisErrors.Inc()
		s.log.ErrorContext(ctx, "refund failed", "err", err)
	case ok:
		s.metrics.unitsRefunded.WithLabelValues(c.plan.Name).Add(float64(rc.Cost()))
	}
	return err == nil
}

// settle lowers an admitted charge to the price of the work measured, if
// the plan prices work (cost.Model.Settle), and says so in the headers:
// X-RateLimit-Cost stays the price charged up front, X-Quota-Settled-Cost
// is what the request costs in the end, and RateLimit shows the units
// given back.
func (s *Server) settle(ctx context.Context, h http.Header, c caller, d quota.Decision, took time.Duration, features int) {
	if d.Receipt.IsZero() || c.plan.Cost.Settle == nil {
		return
	}
	ms := float64(took.Microseconds()) / 1000
	price := c.plan.Cost.Work(d.Cost, ms, features)
	if price < d.Cost {
		if _, ok, err := s.quota.Settle(ctx, d.Receipt, price); err != nil || !ok {
			if err != nil {
				s.metrics.redisErrors.Inc()
				s.log.ErrorContext(ctx, "settle failed; the request stays charged its price", "err", err)
			}
			price = d.Cost
		} else {
			s.metrics.unitsRefunded.WithLabelValues(c.plan.Name).Add(float64(d.Cost - price))
			setQuotaHeaders(h, given(d, d.Cost-price))
			h.Set("X-RateLimit-Cost", strconv.FormatInt(d.Cost, 10))
		}
	}
	h.Set(headerSettledCost, strconv.FormatInt(price, 10))
}

// given is d as it stands once units of its charge are given back: they
// return to every limit, and the cost shown is what remains charged.
func given(d quota.Decision, units int64) quota.Decision {
	d.Limits = slices.Clone(d.Limits)
	for i := range d.Limits {
		l := &d.Limits[i]
		l.Used = max(l.Used-units, 0)
		l.Remaining = min(l.Remaining+units, l.Limit.Max)
	}
	d.Cost -= units
	return d
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

// X-Quota-Status says how a response was metered.
const (
	headerStatus   = "X-Quota-Status"
	statusCharged  = "charged"
	statusRefunded = "refunded" // charged, then given back: the work failed

	// headerSettledCost is what a request cost once settled on the work
	// it did (plans whose cost model prices work).
	headerSettledCost  = "X-Quota-Settled-Cost"
	statusUnmetered    = "unmetered"     // the quota store failed and the policy is fail-open
	statusShadowDenied = "shadow-denied" // shadow mode: would have been denied
)

// setQuotaHeaders writes the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 for every limit, and the
// X-RateLimit-* fields for the binding one.
func setQuotaHeaders(h http.Header, d quota.Decision) {
	policies := make([]string, len(d.Limits))
	states := make([]string, len(d.Limits))
	for i, l := range d.Limits {
		policies[i] = fmt.Sprintf("%q;q=%d;w=%d", l.Limit.Name, l.Limit.Max, ceilSeconds(l.Limit.Window))
		states[i] = fmt.Sprintf("%q;r=%d;t=%d", l.Limit.Name, l.Remaining, ceilSeconds(l.ResetAfter))
	}
	h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	h.Set("RateLimit", strings.Join(states, ", "))
	b := d.BindingLimit()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(b.Limit.Max, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(b.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(b.ResetAfter), 10))
	h.Set("X-RateLimit-Cost", strconv.FormatInt(d.Cost, 10))
}

func ceilSeconds(d time.Duration) int64 {
	return ceilDiv(int64(d), int64(time.Second))
}
