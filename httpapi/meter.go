package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/tileapi/tileapi/keys"
	"github.com/tileapi/tileapi/plans"
	"github.com/tileapi/tileapi/quota"
)

// caller is who a request is charged to.
type caller struct {
	identity  string // the quota identity: "key:<id>" or "ip:<address>"
	plan      plans.Plan
	keyPrefix string // safe to log; empty for anonymous callers
}

// identify resolves the request's API key (X-API-Key, or Authorization:
// Bearer) to its plan; without a key the caller is anonymous, charged by
// client IP.
func (s *Server) identify(r *http.Request) (caller, error) {
	secret := r.Header.Get("X-API-Key")
	if secret == "" {
		if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			secret = strings.TrimSpace(auth[7:])
		}
	}
	if secret == "" {
		if s.cfg.NoAnonymous {
			return caller{}, newProblem(http.StatusUnauthorized, "missing-key", "API key required", "send the API key in X-API-Key or Authorization: Bearer")
		}
		ip := middleware.GetClientIP(r.Context())
		if ip == "" {
			return caller{}, newProblem(http.StatusBadRequest, "no-client-address", "No client address", "the client address could not be read, and the request has no API key")
		}
		p, _ := s.cfg.Plans.Lookup(plans.Anonymous)
		return caller{identity: "ip:" + ip, plan: p}, nil
	}
	prefix := keys.PrefixOf(secret)
	setLogKey(r.Context(), prefix)
	// A key that is not cached costs a lookup in the key store: an address
	// that keeps presenting unknown ones is stopped before it does.
	ip := middleware.GetClientIP(r.Context())
	guarded := s.unknownKeys != nil && ip != "" && !s.cfg.Keys.Cached(secret)
	if guarded {
		p, err := s.unknownKeys.check(r.Context(), ip)
		switch {
		case err != nil:
			s.metrics.redisErrors.Inc()
			s.log.WarnContext(r.Context(), "unknown-key guard: quota store failed; looking the key up", "err", err)
		case p != nil:
			s.metrics.unknownKeyBlocks.Inc()
			return caller{}, p
		}
	}
	k, err := s.cfg.Keys.Resolve(r.Context(), secret)
	if err != nil {
		if errors.Is(err, keys.ErrUnknown) && guarded {
			if err := s.unknownKeys.failed(r.Context(), ip); err != nil {
				s.metrics.redisErrors.Inc()
				s.log.WarnContext(r.Context(), "unknown-key guard: quota store failed", "err", err)
			}
		}
		if errors.Is(err, keys.ErrUnknown) || errors.Is(err, keys.ErrRevoked) {
			return caller{}, err
		}
		s.log.ErrorContext(r.Context(), "key lookup failed", "key", prefix, "err", err)
		p := newProblem(http.StatusServiceUnavailable, "keys-unavailable", "Key store unavailable", "the API key could not be checked; retry shortly")
		p.RetryAfterMS = 1000
		return caller{}, p
	}
	p, ok := s.cfg.Plans.Lookup(k.Plan)
	if !ok {
		return caller{}, newProblem(http.StatusForbidden, "unknown-plan", "Plan not available", fmt.Sprintf("the key's plan %q is not configured on this server", k.Plan))
	}
	return caller{identity: keyIdentity(k.ID), plan: p, keyPrefix: prefix}, nil
}

// response is the outcome of a request's work, written only once the work
// has succeeded, so a failure can still be refunded and answered cleanly.
type response struct {
	contentType string
	body        []byte
	header      http.Header // extra headers
	etag        string      // for If-None-Match; empty for none
}

// metered is one gated request: its route (for metrics), its price, how to
// tell a client what would fit when the price is beyond its plan, and the
// work.
type metered struct {
	route string
	cost  int64
	// fits adds to a 422 problem what would fit in budget units.
	fits func(p *problem, budget int64)
	work func(ctx context.Context) (*response, error)
}

// serve charges the caller, runs the work and writes its response, with the
// quota headers on every outcome. A denied request is never charged; a
// request whose work fails after the charge is refunded.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c caller, m metered) {
	ctx := r.Context()
	qctx, cancel := context.WithTimeout(ctx, s.cfg.QuotaTimeout)
	start := time.Now()
	d, err := s.cfg.Quota.Charge(qctx, c.identity, c.plan.Quota, m.cost)
	cancel()
	s.metrics.quotaLatency.Observe(time.Since(start).Seconds())

	var tooCostly *quota.TooCostlyError
	switch {
	case errors.As(err, &tooCostly):
		s.metrics.decisions.WithLabelValues(c.plan.Name, "too_costly").Inc()
		p := newProblem(http.StatusUnprocessableEntity, "cost-exceeds-plan", "Request costs more than the plan allows",
			fmt.Sprintf("this request costs %d units; limit %q of plan %q admits at most %d in any %s",
				m.cost, tooCostly.Limit.Name, c.plan.Name, tooCostly.Limit.Max, tooCostly.Limit.Window))
		p.Cost, p.Limit, p.MaxCost = m.cost, tooCostly.Limit.Name, c.plan.Quota.MaxCost()
		if m.fits != nil {
			m.fits(p, p.MaxCost)
		}
		writeProblem(w, p)
		return
	case err != nil:
		s.metrics.redisErrors.Inc()
		s.log.ErrorContext(ctx, "quota store failed", "err", err, "fail_closed", s.cfg.FailClosed)
		if s.cfg.FailClosed {
			p := newProblem(http.StatusServiceUnavailable, "quota-unavailable", "Quota service unavailable", "the request could not be metered; retry shortly")
			p.RetryAfterMS = 1000
			writeProblem(w, p)
			return
		}
		s.metrics.failOpen.Inc()
		w.Header().Set(headerStatus, statusUnmetered)
		s.work(w, r, c, m, quota.Receipt{})
		return
	}

	setQuotaHeaders(w.Header(), d)
	if d.BindingLimit().Remaining*10 < d.BindingLimit().Limit.Max {
		s.metrics.nearLimit.WithLabelValues(c.plan.Name).Inc()
	}
	if !d.Allowed {
		s.metrics.decisions.WithLabelValues(c.plan.Name, "denied").Inc()
		if s.cfg.Shadow {
			w.Header().Set(headerStatus, statusShadowDenied)
			s.work(w, r, c, m, quota.Receipt{})
			return
		}
		l := d.BindingLimit().Limit
		p := newProblem(http.StatusTooManyRequests, "quota-exceeded", "Quota exceeded",
			fmt.Sprintf("limit %q of plan %q (%d units per %s) has %d units left; this request costs %d",
				l.Name, c.plan.Name, l.Max, l.Window, d.BindingLimit().Remaining, m.cost))
		p.Limit, p.Cost = l.Name, m.cost
		p.RetryAfterMS = max(1, ceilDiv(d.RetryAfter.Microseconds(), 1000))
		writeProblem(w, p)
		return
	}
	s.metrics.decisions.WithLabelValues(c.plan.Name, "allowed").Inc()
	s.metrics.unitsCharged.WithLabelValues(c.plan.Name).Add(float64(m.cost))
	w.Header().Set(headerStatus, statusCharged)
	s.work(w, r, c, m, d.Receipt)
}

// work runs the request's work and writes the response; if the work fails,
// the charge (if any) is refunded before the error is answered.
func (s *Server) work(w http.ResponseWriter, r *http.Request, c caller, m metered, rc quota.Receipt) {
	start := time.Now()
	resp, err := m.work(r.Context())
	s.metrics.queryLatency.WithLabelValues(m.route).Observe(time.Since(start).Seconds())
	if err != nil {
		// Whatever went wrong, the client gets nothing for its units.
		s.refund(r.Context(), c, rc)
		p := problemFor(err)
		if p.Status >= 500 {
			s.log.ErrorContext(r.Context(), "request failed", "route", m.route, "err", err)
		}
		writeProblem(w, p)
		return
	}
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

// refund gives back a charge whose work failed. It runs even if the client
// has gone, within its own time budget.
func (s *Server) refund(ctx context.Context, c caller, rc quota.Receipt) {
	if rc.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.QuotaTimeout)
	defer cancel()
	if ok, err := s.cfg.Quota.Refund(ctx, rc); err != nil {
		s.log.ErrorContext(ctx, "refund failed", "err", err)
	} else if ok {
		s.metrics.unitsRefunded.WithLabelValues(c.plan.Name).Add(float64(rc.Cost()))
	}
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
	headerStatus       = "X-Quota-Status"
	statusCharged      = "charged"
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
