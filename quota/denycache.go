package quota

import (
	"context"
	"fmt"
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
//
// A plan with Shared identities frees units before T also when one of
// them is given back units: a refund, settlement or reset made through
// the cache of any identity (another key of the same customer) drops
// every denial whose plan shares it, as well as its own.
//
// It is safe for concurrent use.
type DenyCache struct {
	store Store
	now   func() time.Time

	mu     sync.Mutex
	denied map[string]denial
	// shared counts, per identity that remembered denials' plans share,
	// the refunds, settlements and resets of it made through the cache
	// (freed), and the denials that share it (refs): a denial holds while
	// the freed counts of its Shared identities are those it saw.
	shared map[string]sharedFrees
}

// sharedFrees is what a DenyCache counts of a Shared identity.
type sharedFrees struct{ freed, refs int }

// denial is a remembered denial of an identity.
type denial struct {
	limits []Limit   // the plan's and its Shared plans', which it holds for
	shared []string  // the plan's Shared identities
	freed  []int     // the freed count of each when the denial was made
	cost   int64     // the cost denied; a costlier charge cannot fit either
	until  time.Time // when it may fit
	d      Decision
}

// NewDenyCache returns store with a cache of its denials in front.
func NewDenyCache(store Store) *DenyCache {
	return &DenyCache{store: store, now: time.Now, denied: make(map[string]denial), shared: make(map[string]sharedFrees)}
}

// InProcess reports whether the store behind the cache answers without
// I/O (Memory.InProcess).
func (c *DenyCache) InProcess() bool {
	local, ok := c.store.(interface{ InProcess() bool })
	return ok && local.InProcess()
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
	e := denial{limits: make([]Limit, 0, plan.limitCount()), cost: cost, until: now.Add(d.RetryAfter), d: d}
	for k := range plan.parts() {
		e.limits = append(e.limits, plan.partPlan(k).Limits...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.denied[identity]; !ok && len(c.denied) >= DenyCacheSize {
		for id := range c.denied { // map iteration starts at random
			c.drop(id)
			break
		}
	}
	c.drop(identity)
	for _, s := range plan.Shared {
		f := c.shared[s.Identity]
		f.refs++
		c.shared[s.Identity] = f
		e.shared, e.freed = append(e.shared, s.Identity), append(e.freed, f.freed)
	}
	c.denied[identity] = e
}

// drop forgets identity's denial, with c.mu held.
func (c *DenyCache) drop(identity string) {
	e, ok := c.denied[identity]
	if !ok {
		return
	}
	delete(c.denied, identity)
	for _, s := range e.shared {
		f := c.shared[s]
		if f.refs--; f.refs == 0 {
			delete(c.shared, s)
		} else {
			c.shared[s] = f
		}
	}
}

// holds reports whether e answers a charge under plan: it was made under
// the same limits and Shared identities, none of which has been given
// back units through the cache since. c.mu is held.
func (c *DenyCache) holds(e denial, plan Plan) bool {
	if len(e.shared) != len(plan.Shared) || len(e.limits) != plan.limitCount() {
		return false
	}
	rest := e.limits
	for k := range plan.parts() {
		ls := plan.partPlan(k).Limits
		if !slices.Equal(rest[:len(ls)], ls) {
			return false
		}
		rest = rest[len(ls):]
	}
	for k, s := range plan.Shared {
		if e.shared[k] != s.Identity || c.shared[s.Identity].freed != e.freed[k] {
			return false
		}
	}
	return true
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
	return c.through(identity, plan, cost, func() (Decision, bool, error) {
		return with.ChargeWith(ctx, identity, plan, cost, along...)
	})
}

// ChargeHolding is ChargeWith taking slot, one of the identity's in-flight
// slots, in the charge's script (Redis.ChargeHolding): a remembered denial
// answers without taking it. A store that cannot take slots (not a
// *Redis) returns an error matching ErrInvalid.
func (c *DenyCache) ChargeHolding(ctx context.Context, identity string, plan Plan, cost int64, slot Slot, along ...redis.Cmder) (Decision, bool, error) {
	holding, ok := c.store.(interface {
		ChargeHolding(ctx context.Context, identity string, plan Plan, cost int64, slot Slot, along ...redis.Cmder) (Decision, bool, error)
	})
	if !ok {
		return Decision{}, false, fmt.Errorf("%w: the store behind the deny cache takes no in-flight slots", ErrInvalid)
	}
	return c.through(identity, plan, cost, func() (Decision, bool, error) {
		return holding.ChargeHolding(ctx, identity, plan, cost, slot, along...)
	})
}

// through answers a charge a remembered denial covers with that denial,
// and makes it with charge otherwise, remembering a denial it answers.
func (c *DenyCache) through(identity string, plan Plan, cost int64, charge func() (Decision, bool, error)) (Decision, bool, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, false, err
	}
	now := c.now()
	if d, ok := c.remembered(identity, plan, cost, now); ok {
		return d, false, nil
	}
	d, sent, err := charge()
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
	ok = ok && cost >= e.cost && now.Before(e.until) && c.holds(e, plan)
	c.mu.Unlock()
	if !ok {
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

// Refund gives the charge back and forgets the denials of every identity
// it gives back to, and of the plans that share them: the units it frees
// may fit now. It returns the store's errors.
func (c *DenyCache) Refund(ctx context.Context, rc Receipt) (bool, error) {
	// Before and after: a denial cached while the refund runs would
	// outlive it.
	c.forgetReceipt(rc)
	defer c.forgetReceipt(rc)
	return c.store.Refund(ctx, rc)
}

// Settle lowers the charge and forgets the denials Refund does. It
// returns the store's errors.
func (c *DenyCache) Settle(ctx context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	c.forgetReceipt(rc)
	defer c.forgetReceipt(rc)
	return c.store.Settle(ctx, rc, actual)
}

// Reset forgets the identity's charges, its denial and those of the plans
// that share it. It returns the store's errors.
func (c *DenyCache) Reset(ctx context.Context, identity string) error {
	c.forget(identity)
	defer c.forget(identity)
	return c.store.Reset(ctx, identity)
}

// forgetReceipt forgets the denials units given back by rc may make too
// early: forget of each of its parts' identities.
func (c *DenyCache) forgetReceipt(rc Receipt) {
	for k := range rc.parts() {
		c.forget(rc.part(k).identity)
	}
}

// forget drops identity's denial, and every denial whose plan shares it.
func (c *DenyCache) forget(identity string) {
	c.mu.Lock()
	c.drop(identity)
	if f, ok := c.shared[identity]; ok {
		f.freed++
		c.shared[identity] = f
	}
	c.mu.Unlock()
}
