package quota

import "context"

// Store is a quota store: *Redis, *Memory, or a *DenyCache in front of
// either. A denial is not an error but a Decision with Allowed false. The
// errors are the same for every store, matched with errors.Is and
// errors.As:
//
//   - ErrInvalid: a malformed plan, an empty identity, a cost out of range,
//     the zero Receipt or a settled cost above the charged one; reported
//     before any I/O, and nothing changes.
//   - ErrTooCostly, a *TooCostlyError (Charge): a cost above one of the
//     plan's maxima, which no wait would admit; reported before any I/O.
//   - ErrLate (Redis's Charge): the charge reached Redis after its
//     context's deadline and was not made.
//   - Anything else is the store's failure (Redis's or its client's),
//     wrapped with %w. After one, a charge, refund or settlement may or may
//     not have been made: a refund or settlement by the same receipt can be
//     retried safely (it reports false if the first attempt was made).
//     Memory never fails this way.
type Store interface {
	Charge(ctx context.Context, identity string, plan Plan, cost int64) (Decision, error)
	Peek(ctx context.Context, identity string, plan Plan) (Decision, error)
	Refund(ctx context.Context, rc Receipt) (bool, error)
	Settle(ctx context.Context, rc Receipt, actual int64) (Receipt, bool, error)
	Reset(ctx context.Context, identity string) error
}

var (
	_ Store = (*Redis)(nil)
	_ Store = (*Memory)(nil)
	_ Store = (*DenyCache)(nil)
)
