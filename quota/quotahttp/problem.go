package quotahttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// Problem is an RFC 9457 problem+json body. Code is the stable,
// machine-readable name of the problem; the other members carry what a
// client needs to act on it.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`

	// Limit names the limit that refused.
	Limit string `json:"limit,omitempty"`
	// Cost is the price of the request refused.
	Cost int64 `json:"cost,omitempty"`
	// MaxCost is the most the plan can ever admit in one request.
	MaxCost int64 `json:"max_cost,omitempty"`
	// RetryAfterMS is when a retry of the same cost fits, in
	// milliseconds (Retry-After has whole seconds).
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
	// ResetsAt is when a spent calendar period starts again (RFC 3339).
	ResetsAt string `json:"resets_at,omitempty"`
}

// NewProblem returns a problem of the given status and code. Its type is
// "about:blank" (RFC 9457 section 4.2.1): Code names the problem, and a
// service that documents its problems at pages of its own sets Type.
func NewProblem(status int, code, title, detail string) *Problem {
	return &Problem{Type: "about:blank", Title: title, Status: status, Detail: detail, Code: code}
}

// ProblemFor is the problem the default error handler answers for err:
//
//   - *DeniedError: 429 quota-exceeded, or quota-exhausted when the
//     binding limit is a calendar period (with resets_at);
//   - *quota.TooCostlyError: 422 cost-exceeds-plan;
//   - *quota.SlotsHeldError: 429 concurrency-exceeded (limit "in-flight");
//   - *UnavailableError: 503 quota-unavailable;
//   - context.Canceled: 499 client-closed (nobody reads it; logs do);
//   - an error with an HTTPStatus() int method: that status, code
//     "request-refused", the error's text as detail;
//   - anything else: 500 internal, its text hidden.
func ProblemFor(err error) *Problem {
	var (
		denied    *DeniedError
		tooCostly *quota.TooCostlyError
		held      *quota.SlotsHeldError
		down      *UnavailableError
		status    interface{ HTTPStatus() int }
	)
	switch {
	case errors.As(err, &denied):
		d := denied.Decision
		l := d.BindingLimit()
		var p *Problem
		if l.Limit.Period != quota.Sliding {
			resets := ResetTime(time.Now(), d.RetryAfter)
			p = NewProblem(http.StatusTooManyRequests, "quota-exhausted", "Quota exhausted",
				fmt.Sprintf("limit %q of plan %q (%d units a %s) has %d units left; this request costs %d; it starts again at %s",
					l.Limit.Name, planOf(denied.Plan, l.Limit.Name), l.Limit.Max, l.Limit.Period, l.Remaining, denied.Cost, resets))
			p.ResetsAt = resets
		} else {
			p = NewProblem(http.StatusTooManyRequests, "quota-exceeded", "Quota exceeded",
				fmt.Sprintf("limit %q of plan %q (%d units per %s) has %d units left; this request costs %d",
					l.Limit.Name, planOf(denied.Plan, l.Limit.Name), l.Limit.Max, l.Limit.Window, l.Remaining, denied.Cost))
		}
		p.Limit, p.Cost = l.Limit.Name, denied.Cost
		p.RetryAfterMS = max(1, ceilDiv(d.RetryAfter.Microseconds(), 1000))
		return p
	case errors.As(err, &tooCostly):
		l := tooCostly.Limit
		p := NewProblem(http.StatusUnprocessableEntity, "cost-exceeds-plan", "Request costs more than the plan allows",
			fmt.Sprintf("this request costs %d units; limit %q of plan %q admits at most %d in any %s",
				tooCostly.Cost, l.Name, planOf(tooCostly.Plan, l.Name), l.Max, periodOrWindow(l)))
		p.Cost, p.Limit, p.MaxCost = tooCostly.Cost, l.Name, tooCostly.Plan.MaxCost()
		return p
	case errors.As(err, &held):
		p := NewProblem(http.StatusTooManyRequests, "concurrency-exceeded", "Too many requests in progress",
			fmt.Sprintf("all %d requests this caller may have in progress at once are; retry when one has finished", held.Max))
		// A slot comes back when one of the caller's requests ends, usually
		// well before the lease that bounds the wait.
		p.Limit, p.RetryAfterMS = "in-flight", max(1, min(held.Expires, time.Second).Milliseconds())
		return p
	case errors.As(err, &down):
		p := NewProblem(http.StatusServiceUnavailable, "quota-unavailable", "Quota service unavailable",
			"the request could not be metered and was not served; retry shortly")
		p.RetryAfterMS = 1000
		return p
	case errors.Is(err, context.Canceled):
		return NewProblem(499, "client-closed", "Client closed the request",
			"the client went away before the response; the request was not charged")
	case errors.As(err, &status):
		s := status.HTTPStatus()
		return NewProblem(s, "request-refused", http.StatusText(s), err.Error())
	}
	return NewProblem(http.StatusInternalServerError, "internal", "Internal error", "the server failed; the request was not charged")
}

// ResetTime is when a calendar period that ends after d, from now, starts
// again, as RFC 3339 in UTC to the second: rounded, since a period ends on
// a whole second and d is measured from an instant within one.
func ResetTime(now time.Time, d time.Duration) string {
	return now.Add(d).UTC().Round(time.Second).Format(time.RFC3339)
}

func periodOrWindow(l quota.Limit) string {
	if l.Period != quota.Sliding {
		return string(l.Period)
	}
	return l.Window.String()
}

// WriteProblem is the default error handler: it writes ProblemFor(err) as
// application/problem+json.
func WriteProblem(w http.ResponseWriter, _ *http.Request, err error) {
	p := ProblemFor(err)
	p.Write(w, p)
}

// Write answers p as application/problem+json, never cached, with
// Retry-After from RetryAfterMS unless the gate has set it already. body
// is what is encoded: p, or a problem of the service's that embeds it
// with members of its own.
func (p *Problem) Write(w http.ResponseWriter, body any) {
	h := w.Header()
	if p.RetryAfterMS > 0 && h.Get("Retry-After") == "" {
		h.Set("Retry-After", strconv.FormatInt(ceilDiv(p.RetryAfterMS, 1000), 10))
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// planOf returns the name of the plan of a charge under plan that has the
// limit named limit: plan's own, or one of its Shared plans'.
func planOf(plan quota.Plan, limit string) string {
	for _, s := range plan.Shared {
		if slices.ContainsFunc(s.Plan.Limits, func(l quota.Limit) bool { return l.Name == limit }) {
			return s.Plan.Name
		}
	}
	return plan.Name
}
