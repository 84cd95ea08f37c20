package inflight

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
)

// Store is the quota store a Held wraps: a *quota.Redis, a *quota.Memory
// or a *quota.DenyCache in front of either.
type Store interface {
	Charge(ctx context.Context, identity string, plan quota.Plan, cost int64) (quota.Decision, error)
	Peek(ctx context.Context, identity string, plan quota.Plan) (quota.Decision, error)
	Refund(ctx context.Context, rc quota.Receipt) (bool, error)
	Settle(ctx context.Context, rc quota.Receipt, actual int64) (quota.Receipt, bool, error)
}

// slotCharger is a store that takes a slot in its charge's script:
// quota.Redis, or quota.DenyCache in front of it.
type slotCharger interface {
	ChargeHolding(ctx context.Context, identity string, plan quota.Plan, cost int64, slot quota.Slot, along ...redis.Cmder) (quota.Decision, bool, error)
}

var (
	_ slotCharger = (*quota.Redis)(nil)
	_ slotCharger = (*quota.DenyCache)(nil)
)

// Held is a quota store that takes one of an identity's slots with the
// charge it admits, for one request: the charge is made only if a slot is
// free, and a slot is taken only if the charge is admitted. A charge
// refused for its slot returns a *quota.SlotsHeldError and charges
// nothing. Its peeks, refunds and settlements are the store's. Make one a
// request with Redis.Hold or Memory.Hold, charge through it (the identity
// charged must be its own), and Release it once the request is done.
type Held struct {
	store    Store
	identity string
	max      int
	charge   func(ctx context.Context, h *Held, plan quota.Plan, cost int64, along []redis.Cmder) (quota.Decision, bool, error)
	release  func(Lease)

	mu    sync.Mutex
	lease Lease // the slot taken; zero until a charge is admitted
}

// Charge charges cost to the identity under plan and takes a slot if
// admitted; see Held.
func (h *Held) Charge(ctx context.Context, _ string, plan quota.Plan, cost int64) (quota.Decision, error) {
	d, _, err := h.charge(ctx, h, plan, cost, nil)
	return d, err
}

// ChargeWith is Charge with the commands along sent in the same round
// trip, where the store can (quota.Redis.ChargeHolding); sent reports
// whether they went.
func (h *Held) ChargeWith(ctx context.Context, _ string, plan quota.Plan, cost int64, along ...redis.Cmder) (quota.Decision, bool, error) {
	return h.charge(ctx, h, plan, cost, along)
}

// Peek is the store's.
func (h *Held) Peek(ctx context.Context, identity string, plan quota.Plan) (quota.Decision, error) {
	return h.store.Peek(ctx, identity, plan)
}

// Refund is the store's: the slot stays held until Release.
func (h *Held) Refund(ctx context.Context, rc quota.Receipt) (bool, error) {
	return h.store.Refund(ctx, rc)
}

// Settle is the store's.
func (h *Held) Settle(ctx context.Context, rc quota.Receipt, actual int64) (quota.Receipt, bool, error) {
	return h.store.Settle(ctx, rc, actual)
}

// Lease returns the slot held: the zero Lease until a charge is admitted.
// Renew it while the request's work runs.
func (h *Held) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// took records the slot an admitted charge took.
func (h *Held) took(l Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease = l
}

// Release gives the slot back, if a charge took one, without waiting for
// Redis: see Redis.Hold. Twice is harmless.
func (h *Held) Release() {
	h.mu.Lock()
	l := h.lease
	h.lease = Lease{}
	h.mu.Unlock()
	if !l.IsZero() {
		h.release(l)
	}
}

// Hold returns a store that takes one of max slots of identity with the
// charge it admits, in the charge's own script: store must be a
// *quota.Redis on the same Redis (or a *quota.DenyCache in front of one),
// and a request with an in-flight limit costs one round trip. Leases this
// process owes the identity (releases not yet answered) are given back
// in that script first.
//
// Held.Release gives the slot back off the caller's path: the release
// waits in this process's memory, rides with the identity's next charge
// or acquire on this server, and is sent at once in the background, with
// the other releases owed, in one pipeline, and again after a failure
// until Redis answers or the lease would have ended. So a client that
// waits for its answer before its next request finds its slot free on
// the same server; and a server that dies frees its slots within a lease.
//
// A charge refused before any I/O (an error matching quota.ErrInvalid or
// quota.ErrTooCostly) or answered from a deny cache takes no slot. One
// that fails in Redis may have taken its slot: it is given back as a
// release is. Over a store that cannot take slots in its script, the
// slot is acquired first (Acquire), kept if the charge is admitted and
// given back otherwise: exact, in two round trips.
func (r *Redis) Hold(store Store, identity string, max int) *Held {
	return &Held{store: store, identity: identity, max: max, charge: r.charge,
		release: func(l Lease) { r.releaseLater(l, time.Time{}) }}
}

// charge charges h's identity, taking a slot in the script.
func (r *Redis) charge(ctx context.Context, h *Held, plan quota.Plan, cost int64, along []redis.Cmder) (quota.Decision, bool, error) {
	if err := check(h.identity, h.max); err != nil {
		return quota.Decision{}, false, err
	}
	charger, ok := h.store.(slotCharger)
	if !ok {
		return h.acquiring(ctx, r.Acquire, plan, cost, along)
	}
	id, err := newID()
	if err != nil {
		return quota.Decision{}, false, err
	}
	slot := quota.Slot{Key: r.key(h.identity), ID: id, Max: h.max, Lease: r.lease, Release: r.pending.of(h.identity)}
	d, sent, err := charger.ChargeHolding(ctx, h.identity, plan, cost, slot, along...)
	l := Lease{identity: h.identity, id: id}
	switch {
	case err == nil && d.Allowed:
		h.took(l)
	case err != nil && !errors.Is(err, quota.ErrInvalid) && !errors.Is(err, quota.ErrTooCostly) &&
		!errors.Is(err, quota.ErrSlotsHeld) && !errors.Is(err, quota.ErrLate):
		r.unknown(ctx, l) // Redis may have taken it
	}
	return d, sent, err
}

// Hold returns a store that takes one of max slots of identity with the
// charge it admits: the slot is counted before the charge and given back
// if the charge is not admitted, so the limit is exact in the process
// whatever the store (a request refused meanwhile for that slot is the
// only trace of a charge denied). A charge refused for its slot returns a
// *quota.SlotsHeldError whose Expires is a second, since no lease
// expires. The commands along a charge go with it where the store sends
// them (ChargeWith). Held.Release gives the slot back at once.
func (m *Memory) Hold(store Store, identity string, max int) *Held {
	return &Held{store: store, identity: identity, max: max, charge: m.charge,
		release: func(l Lease) { _ = m.Release(context.Background(), l) }}
}

// charge charges h's identity with a slot counted first.
func (m *Memory) charge(ctx context.Context, h *Held, plan quota.Plan, cost int64, along []redis.Cmder) (quota.Decision, bool, error) {
	return h.acquiring(ctx, m.Acquire, plan, cost, along)
}

// acquiring charges h's identity with a slot taken by acquire first, kept
// if the charge is admitted and given back otherwise, and the commands
// along sent with the charge where the store sends them (ChargeWith).
func (h *Held) acquiring(ctx context.Context, acquire func(context.Context, string, int) (Lease, *Denial, error), plan quota.Plan, cost int64, along []redis.Cmder) (quota.Decision, bool, error) {
	l, denial, err := acquire(ctx, h.identity, h.max)
	switch {
	case err != nil:
		return quota.Decision{}, false, err
	case denial != nil:
		return quota.Decision{}, false, &quota.SlotsHeldError{Max: denial.Max, Expires: denial.RetryAfter}
	}
	var d quota.Decision
	sent := false
	if with, ok := h.store.(interface {
		ChargeWith(ctx context.Context, identity string, plan quota.Plan, cost int64, along ...redis.Cmder) (quota.Decision, bool, error)
	}); ok && len(along) > 0 {
		d, sent, err = with.ChargeWith(ctx, h.identity, plan, cost, along...)
	} else {
		d, err = h.store.Charge(ctx, h.identity, plan, cost)
	}
	if err == nil && d.Allowed {
		h.took(l)
	} else {
		h.release(l)
	}
	return d, sent, err
}
