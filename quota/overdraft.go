package quota

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
)

//go:embed overdraft.lua
var overdraftLua string

// OverdraftIDLife is how long Redis remembers the id of an overdraft
// charge: a retry of the same id within it is not counted again.
const OverdraftIDLife = time.Hour

// overdraftMax stands for every max of an overdraft charge: above any sum
// of costs a log or counter can hold, so nothing refuses it.
const overdraftMax = 1 << 53

// ChargeOverdraft records cost units for identity in every limit of plan
// (its Shared plans' too), whether they fit or not: the charge of a
// request already served without one, made once the store answers again
// (quotahttp's pending charges). A limit it takes past its max reports
// Used above Max and Remaining 0, and refuses charges until enough of it
// has left the window or the period has ended. It returns the decision
// (Allowed, with a Receipt as Charge's) and true when it made the charge.
//
// id names the charge, so that it can be retried: Redis remembers it for
// OverdraftIDLife, and a charge of an id it remembers is not made again
// (ChargeOverdraft returns the zero Decision and false), in any part. It
// must be a token (letters, digits and "-_.", at most 64) unique to the
// charge. A bad identity, plan, cost or id returns an error matching
// ErrInvalid, a cost above a limit's max a *TooCostlyError, both before
// any I/O; any other error is Redis's (or the PeriodSource's), wrapped,
// after which the charge may or may not have been made: retry it with the
// same id.
func (r *Redis) ChargeOverdraft(ctx context.Context, identity string, plan Plan, cost int64, id string) (Decision, bool, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, false, err
	}
	if !isToken(id) {
		return Decision{}, false, invalid("overdraft: id %q must be letters, digits, '-', '_' or '.', at most 64", id)
	}
	// A charge with no deadline: it was served already.
	c := chargeCall{identity: identity, plan: plan, cost: cost, record: true, overdraft: true}
	reply, err := r.withRestores(ctx, &c, func() (string, error) {
		keys, args := r.chargeArgs(&c)
		// The mark is the charged identity's: the script makes every part
		// or none.
		keys = append(keys, r.key(identity)+":overdraft:"+id)
		args = append(args, strconv.FormatInt(OverdraftIDLife.Milliseconds(), 10))
		reply, err := r.runScript(ctx, overdraftFn, keys, args...).Text()
		if err != nil {
			return "", fmt.Errorf("quota: overdraft: %w", err)
		}
		return reply, nil
	})
	switch {
	case err != nil:
		return Decision{}, false, err
	case reply == duplicateReply:
		return Decision{}, false, nil
	}
	d, err := r.decision(&c, reply)
	if err == nil && !d.Allowed {
		err = fmt.Errorf("quota: overdraft: the script did not record the charge")
	}
	return d, err == nil, err
}

// ChargeOverdraft passes an overdraft charge on to the store, if it makes
// them (Redis does); it denies nothing, so no denial is dropped or added.
// A store that makes none returns an error matching ErrInvalid.
func (c *DenyCache) ChargeOverdraft(ctx context.Context, identity string, plan Plan, cost int64, id string) (Decision, bool, error) {
	o, ok := c.store.(interface {
		ChargeOverdraft(ctx context.Context, identity string, plan Plan, cost int64, id string) (Decision, bool, error)
	})
	if !ok {
		return Decision{}, false, invalid("overdraft: a %T makes no overdraft charges", c.store)
	}
	return o.ChargeOverdraft(ctx, identity, plan, cost, id)
}
