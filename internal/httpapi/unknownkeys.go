package httpapi

import (
	"context"
	"fmt"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// DefaultUnknownKeys is how many unknown API keys a client network may
// present in a minute before its key lookups stop (Config.UnknownKeys).
const DefaultUnknownKeys = 30

// unknownKeyGuard keeps a flood of made-up API keys off the key store.
//
// Every key the store holds is in the server's key index, answered from
// memory; the guard never sees those, so it can never refuse a valid key
// the index knows. A key the index does not know (made moments ago on
// another server, or made up) costs a store lookup: before it, the guard
// charges one unit to the client network's unknown-key allowance, in one
// atomic decision, so concurrent requests cannot overrun it. The charge is
// refunded when the key turns out to exist; a network whose allowance is
// spent gets a 429 without a lookup. The allowance is held in the quota
// store, shared by every server; while that store fails, each server keeps
// one of its own in process, so a Redis outage does not open the key
// store to the flood.
type unknownKeyGuard struct {
	shared Quota
	local  *quota.Memory
	plan   quota.Plan
	// storeFailed is told each failure of the shared store.
	storeFailed func(ctx context.Context, err error)
}

func newUnknownKeyGuard(cfg Config, shared Quota, storeFailed func(context.Context, error)) (*unknownKeyGuard, error) {
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
	return &unknownKeyGuard{shared: shared, local: quota.NewMemory(nil), plan: p, storeFailed: storeFailed}, nil
}

// ticket is one unit charged to a network's allowance: the store it was
// charged in, and its receipt.
type ticket struct {
	store   Quota
	receipt quota.Receipt
}

// admit charges one lookup to network, or returns a
// *tooManyUnknownKeysError when its allowance is spent.
func (g *unknownKeyGuard) admit(ctx context.Context, network string) (ticket, error) {
	id := unknownKeyIdentity(network)
	store := g.shared
	d, err := store.Charge(ctx, id, g.plan, 1)
	if err != nil {
		g.storeFailed(ctx, err)
		store = g.local
		if d, err = store.Charge(ctx, id, g.plan, 1); err != nil {
			return ticket{}, err
		}
	}
	if !d.Allowed {
		return ticket{}, &tooManyUnknownKeysError{usage: d.Limits[0]}
	}
	return ticket{store: store, receipt: d.Receipt}, nil
}

// refund gives back a ticket whose key turned out to exist, or could not be
// checked: only unknown keys spend the allowance.
func (g *unknownKeyGuard) refund(ctx context.Context, t ticket) {
	if _, err := t.store.Refund(ctx, t.receipt); err != nil {
		g.storeFailed(ctx, err)
	}
}
