package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// DefaultUnknownKeys is how many unknown API keys a client address may
// present in a minute before its key lookups stop (Config.UnknownKeys).
const DefaultUnknownKeys = 30

// unknownKeyGuard keeps a flood of made-up API keys off the key store. A
// key the resolver has not cached costs a store lookup; each one that turns
// out unknown is charged, one unit, to its client address in the quota
// itself, and an address whose minute is spent gets a 429 for uncached keys
// without a lookup. Keys already cached, known or not, cost nothing and are
// never refused by it.
type unknownKeyGuard struct {
	quota   Quota
	plan    quota.Plan
	timeout time.Duration
	shadow  bool
}

func newUnknownKeyGuard(cfg Config) (*unknownKeyGuard, error) {
	n := cfg.UnknownKeys
	if n < 0 {
		return nil, nil
	}
	if n == 0 {
		n = DefaultUnknownKeys
	}
	p, err := quota.NewPlan("unknown-keys", quota.Limit{Name: "minute", Max: n, Window: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("httpapi: UnknownKeys: %w", err)
	}
	return &unknownKeyGuard{quota: cfg.Quota, plan: p, timeout: cfg.QuotaTimeout, shadow: cfg.Shadow}, nil
}

func unknownKeyIdentity(ip string) string { return "unknown-key:ip:" + ip }

// check returns a 429 problem when ip has presented its minute's worth of
// unknown keys. A failing quota store lets the lookup go ahead: the guard
// protects the key store, it does not meter anyone.
func (g *unknownKeyGuard) check(ctx context.Context, ip string) (*problem, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	d, err := g.quota.Peek(ctx, unknownKeyIdentity(ip), g.plan)
	if err != nil {
		return nil, err
	}
	l := d.Limits[0]
	if l.Remaining > 0 || g.shadow {
		return nil, nil
	}
	p := newProblem(http.StatusTooManyRequests, "too-many-unknown-keys", "Too many unknown API keys",
		fmt.Sprintf("this address presented %d unknown API keys in the last %s; keys it presents are checked again once the oldest of those is a minute old",
			l.Used, l.Limit.Window))
	p.RetryAfterMS = max(l.ResetAfter.Milliseconds(), 1)
	return p, nil
}

// failed charges one unknown key to ip.
func (g *unknownKeyGuard) failed(ctx context.Context, ip string) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	_, err := g.quota.Charge(ctx, unknownKeyIdentity(ip), g.plan, 1)
	return err
}
