package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// budgetQuota bounds every call of the quota store by the time budget, so
// that a dead, slow or hung Redis costs a request at most that long and
// the failure policy decides in time. A failure of the store, its budget
// run out included, is a *quotahttp.UnavailableError; what the store refuses
// as invalid or too costly is returned as it is. NewServer wraps the quota
// with it once, so no call site can forget.
type budgetQuota struct {
	q       Quota
	timeout time.Duration
}

func (b budgetQuota) Charge(ctx context.Context, identity string, plan quota.Plan, cost int64) (quota.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	d, err := b.q.Charge(ctx, identity, plan, cost)
	return d, storeFailure(err)
}

func (b budgetQuota) Peek(ctx context.Context, identity string, plan quota.Plan) (quota.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	d, err := b.q.Peek(ctx, identity, plan)
	return d, storeFailure(err)
}

// Refund runs even when the request's client has gone: the units must come
// back whatever happened to it.
func (b budgetQuota) Refund(ctx context.Context, rc quota.Receipt) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	defer cancel()
	ok, err := b.q.Refund(ctx, rc)
	return ok, storeFailure(err)
}

// Settle runs even when the request's client has gone.
func (b budgetQuota) Settle(ctx context.Context, rc quota.Receipt, actual int64) (quota.Receipt, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	defer cancel()
	r, ok, err := b.q.Settle(ctx, rc, actual)
	return r, ok, storeFailure(err)
}

func (b budgetQuota) Reset(ctx context.Context, identity string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return storeFailure(b.q.Reset(ctx, identity))
}

// storeFailure marks an error of the store as such.
func storeFailure(err error) error {
	if err == nil || errors.Is(err, quota.ErrInvalid) || errors.Is(err, quota.ErrTooCostly) {
		return err
	}
	return &quotahttp.UnavailableError{Err: err}
}

// budgetCache bounds every call of the tile cache by the same budget: the
// cache is in the same Redis as the quota, and a slow cache is a miss.
type budgetCache struct {
	c       TileCache
	timeout time.Duration
}

func (b budgetCache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.c.Get(ctx, key)
}

func (b budgetCache) Set(ctx context.Context, key string, tile []byte) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.c.Set(ctx, key, tile)
}

// budgetInFlight bounds the renewals of in-flight leases by the same
// budget: they are in the same Redis. A slot is taken with the charge,
// within the gate's budget, and given back without waiting.
type budgetInFlight struct {
	InFlight
	timeout time.Duration
}

func (b budgetInFlight) Renew(ctx context.Context, l inflight.Lease) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.InFlight.Renew(ctx, l)
}
