package quota

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DenyCacheSize is the most denials a DenyCache remembers; when it is full,
// a new one replaces a random one.
const DenyCacheSize = 10_000

// DenyCache answers, from memory, the charges that a denial just said
// cannot fit: after the store denies an identity a cost c with a retry time
// T, charges of that identity and plan costing c or more are denied until
// T without asking the store, so a client that keeps hammering after its
// 429 costs the store nothing.
//
// This is exact for the traffic of the process that holds the cache: only
// a refund, settlement or reset frees units before T, and those made
// through the cache drop its denial at once. One made by another process
// (another server's refund) is not seen: the identity is then denied here
// until T although the units may fit sooner, never admitted wrongly.
// It is safe for concurrent use.
type DenyCache struct {
	store Store
	now   func() time.Time

	mu     sync.Mutex
	denied map[string]denial
}

// denial is a remembered denial of an identity.
type denial struct {
	limits []Limit   // the plan's, which it holds for
	cost   int64     // the cost denied; a costlier charge cannot fit either
	until  time.Time // when it may fit
	d      Decision
}

// NewDenyCache returns store with a cache of its denials in front.
func NewDenyCache(store Store) *DenyCache {
	return &DenyCache{store: store, now: time.Now, denied: make(map[string]denial)}
}

// Charge answers a charge a remembered denial covers with that denial
// (its RetryAfter counting down), and asks the store otherwise, returning
// its errors (see Store).
func (c *DenyCache) Charge(ctx context.Context, identity string, plan Plan, cost int64) (Decision, error) {
	// A charge no limit could ever admit is told so (ErrTooCostly), and a
	// bad one refused, before any remembered denial answers it.
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, err
	}
	now := c.now()
	if d, ok := c.remembered(identity, plan, cost, now); ok {
		return d, nil
	}
	d, err := c.store.Charge(ctx, identity, plan, cost)
	c.remember(identity, plan, cost, now, d, err)
	return d, err
}

// remember keeps d, the store's answer at now, if it is a denial to
// answer again until its retry time.
func (c *DenyCache) remember(identity string, plan Plan, cost int64, now time.Time, d Decision, err error) {
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.denied[identity]; !ok && len(c.denied) >= DenyCacheSize {
		for id := range c.denied { // map iteration starts at random
			delete(c.denied, id)
			break
		}
	}
	c.denied[identity] = denial{limits: slices.Clone(plan.Limits), cost: cost, until: now.Add(d.RetryAfter), d: d}
}

// ChargeWith is Charge with the commands along sent in the charge's round
// trip, where the store can (quota.Redis.ChargeWith). sent reports
// whether they went: not when the denial was remembered, the charge
// refused before any I/O, or the store cannot send them; the caller then
// does without or sends them itself.
func (c *DenyCache) ChargeWith(ctx context.Context, identity string, plan Plan, cost int64, along ...redis.Cmder) (Decision, bool, error) {
	with, ok := c.store.(interface {
		ChargeWith(ctx context.Context, identity string, plan Plan, cost int64, along ...redis.Cmder) (Decision, bool, error)
	})
	if !ok || len(along) == 0 {
		d, err := c.Charge(ctx, identity, plan, cost)
		return d, false, err
	}
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, false, err
	}
	now := c.now()
	if d, ok := c.remembered(identity, plan, cost, now); ok {
		return d, false, nil
	}
	d, sent, err := with.ChargeWith(ctx, identity, plan, cost, along...)
	c.remember(identity, plan, cost, now, d, err)
	return d, sent, err
}

// Denies reports whether a charge of cost would be denied from memory, and
// with what decision, without asking the store: a caller that would do
// I/O only to pick between costs can skip it when every one is denied.
func (c *DenyCache) Denies(identity string, plan Plan, cost int64) (Decision, bool) {
	return c.remembered(identity, plan, cost, c.now())
}

// remembered is the denial of cost a remembered one covers at now.
func (c *DenyCache) remembered(identity string, plan Plan, cost int64, now time.Time) (Decision, bool) {
	c.mu.Lock()
	e, ok := c.denied[identity]
	c.mu.Unlock()
	if !ok || cost < e.cost || !now.Before(e.until) || !slices.Equal(e.limits, plan.Limits) {
		return Decision{}, false
	}
	d := e.d
	d.Cost, d.RetryAfter = cost, e.until.Sub(now)
	return d, true
}

// Peek asks the store, and returns its errors: a look at usage is never
// answered from memory.
func (c *DenyCache) Peek(ctx context.Context, identity string, plan Plan) (Decision, error) {
	return c.store.Peek(ctx, identity, plan)
}

// Refund gives the charge back and forgets the identity's denial: the
// units it frees may fit now. It returns the store's errors.
func (c *DenyCache) Refund(ctx context.Context, rc Receipt) (bool, error) {
	// Before and after: a denial cached while the refund runs would
	// outlive it.
	c.forget(rc.identity)
	defer c.forget(rc.identity)
	return c.store.Refund(ctx, rc)
}

// Settle lowers the charge and forgets the identity's denial. It returns
// the store's errors.
func (c *DenyCache) Settle(ctx context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	c.forget(rc.identity)
	defer c.forget(rc.identity)
	return c.store.Settle(ctx, rc, actual)
}

// Reset forgets the identity's charges, and its denial. It returns the
// store's errors.
func (c *DenyCache) Reset(ctx context.Context, identity string) error {
	c.forget(identity)
	defer c.forget(identity)
	return c.store.Reset(ctx, identity)
}

func (c *DenyCache) forget(identity string) {
	c.mu.Lock()
	delete(c.denied, identity)
	c.mu.Unlock()
}
