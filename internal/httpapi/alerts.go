package httpapi

import (
	"context"
	"time"

	"github.com/tileapi/tileapi/internal/alerts"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// Alerts claims threshold alerts, to be delivered: an *alerts.Outbox.
type Alerts interface {
	// Claim records e unless its threshold of its limit and period is
	// claimed already, by any server.
	Claim(ctx context.Context, e alerts.Event) (bool, error)
}

// alertTimeout bounds the claims of one request. Only a request whose
// charge crossed a threshold makes any, a few per key and period.
const alertTimeout = time.Second

// alert claims an alert for each threshold of c's plan that the charge
// admitting the request of ctx took a period limit across: its Used went
// from below the threshold to at or above it. Every server sees the
// charges of its own requests; the claim makes one event of a crossing
// seen twice (a refund took the count back below, and a later charge
// crossed again). A claim that fails is logged: that event is not sent.
func (s *Server) alert(ctx context.Context, c caller) {
	if s.cfg.Alerts == nil || len(c.plan.Alerts) == 0 {
		return
	}
	m, ok := quotahttp.FromContext(ctx)
	if !ok || m.Status != quotahttp.StatusCharged && m.Status != quotahttp.StatusOverage {
		return
	}
	d := m.Decision
	for _, l := range d.Limits {
		crossed := alerts.Crossed(c.plan.Alerts[l.Limit.Name], l.Limit.Max, l.Used-d.Cost, l.Used)
		if len(crossed) == 0 {
			continue
		}
		// The period is the one that ends when the count starts again:
		// taken from the store's answer, not this server's clock.
		end := time.Now().Add(l.ResetAfter)
		start, end := l.Limit.Period.Bounds(end.Add(-time.Second), c.plan.Quota.Location)
		claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), alertTimeout)
		for _, pct := range crossed {
			e := alerts.Event{
				KeyID: c.key.ID, CustomerID: c.key.CustomerID, Identity: c.identity, Plan: c.plan.Name,
				Limit: l.Limit.Name, PeriodStart: start, PeriodEnd: end, Threshold: pct, Used: l.Used, Max: l.Limit.Max,
			}
			if _, err := s.cfg.Alerts.Claim(claimCtx, e); err != nil {
				s.log.ErrorContext(ctx, "threshold alert not claimed: it is not sent", "limit", e.Limit, "threshold", pct, "err", err)
			}
		}
		cancel()
	}
}
