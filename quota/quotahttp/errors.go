package quotahttp

import (
	"errors"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// DeniedError is a request whose cost does not fit its plan now: answered
// 429, with Retry-After the time at which the same cost fits again.
type DeniedError struct {
	Identity string
	Plan     quota.Plan
	Cost     int64
	// Decision is the store's answer: its binding limit is the one that
	// refused, and RetryAfter when the cost fits again.
	Decision quota.Decision
}

func (e *DeniedError) Error() string { return "quotahttp: quota exceeded" }

// UnavailableError is a store that failed, or did not answer within the
// time budget, when the gate fails closed: answered 503.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string {
	return "quotahttp: quota store unavailable: " + e.Err.Error()
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// RefusedError is a refusal made by the service's own pricing (see Refuse).
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Refuse marks an error of a cost function as a refusal by the plan rather
// than a bad request, for example a search radius beyond what the plan
// sells: like a denial it is answered by the error handler (with err) and
// charged nothing, and in shadow mode it is served and reported
// shadow-denied.
func Refuse(err error) error { return &RefusedError{Err: err} }

// statusError is an error of the gate's own defaults with its status.
type statusError struct {
	status int
	msg    string
}

func (e statusError) Error() string   { return e.msg }
func (e statusError) HTTPStatus() int { return e.status }

// retryAfter is when a refusal is worth retrying, if it says.
func retryAfter(err error) (time.Duration, bool) {
	var denied *DeniedError
	if errors.As(err, &denied) {
		return denied.Decision.RetryAfter, true
	}
	var says interface{ RetryAfter() time.Duration }
	if errors.As(err, &says) {
		return says.RetryAfter(), true
	}
	return 0, false
}
