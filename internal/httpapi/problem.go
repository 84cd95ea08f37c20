package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/tiles"
)

// problem is an RFC 9457 problem+json body: the gate's (code, limit,
// cost, retry time, ...) and what tileapi's own problems add.
type problem struct {
	quotahttp.Problem

	Field      string  `json:"field,omitempty"`
	MaxRadius  float64 `json:"max_radius_m,omitempty"`
	LowestZoom *int    `json:"lowest_zoom,omitempty"`
	// ExpiredAt is when an expired key or token expired (RFC 3339).
	ExpiredAt string `json:"expired_at,omitempty"`
}

// problemTypeBase prefixes the type of every problem tileapi answers: the
// page that explains its code.
const problemTypeBase = "https://tileapi.dev/problems/"

func newProblem(status int, code, title, detail string) *problem {
	return fromGate(quotahttp.NewProblem(status, code, title, detail))
}

// fromGate is a problem of the gate's, typed as tileapi's.
func fromGate(p *quotahttp.Problem) *problem {
	p.Type = problemTypeBase + p.Code
	return &problem{Problem: *p}
}

// retryAfterDependency is the Retry-After of a failing dependency: soon,
// but not in a tight loop.
const retryAfterDependency = time.Second

// The errors that handlers return and problemFor alone turns into HTTP
// statuses; those of other packages (field, keys, quota, geofence, tiles)
// are matched there too.
var (
	errMissingKey       = errors.New("no API key, and anonymous requests are refused")
	errNoClientAddress  = errors.New("no API key, and the client address could not be read")
	errRouteNotFound    = errors.New("no such route")
	errMethodNotAllowed = errors.New("method not allowed")
	errAdminDisabled    = errors.New("the admin API is disabled")
	errAdminToken       = errors.New("admin token missing or wrong")
	errUsageUnavailable = errors.New("the usage history could not be read")
	// errSecretKeyInBrowser refuses a secret key (tk_sec_) presented with
	// an Origin header: by a browser, where anyone can read it.
	errSecretKeyInBrowser = errors.New("a secret key presented by a browser")
)

// expiredKeyError refuses a key past its expiry.
type expiredKeyError struct{ at time.Time }

func (e *expiredKeyError) Error() string {
	return "the API key expired at " + e.at.Format(time.RFC3339)
}
func (e *expiredKeyError) Unwrap() error { return keys.ErrExpired }

// rotatedKeyError refuses the secret a key had before its last reroll,
// once its overlap is over.
type rotatedKeyError struct{ until time.Time }

func (e *rotatedKeyError) Error() string {
	return "the secret was replaced by a reroll of its key and stopped working at " + e.until.Format(time.RFC3339)
}
func (e *rotatedKeyError) Unwrap() error { return keys.ErrRotated }

// unknownPlanError is a key whose plan, or whose customer's plan, this
// server does not configure.
type unknownPlanError struct {
	plan     string
	customer bool // the plan is the key's customer's
}

func (e *unknownPlanError) Error() string {
	return fmt.Sprintf("the %s plan %q is not configured on this server", e.whose(), e.plan)
}

func (e *unknownPlanError) whose() string {
	if e.customer {
		return "customer's"
	}
	return "key's"
}

// overPlanError is a request whose radius is above its plan's maximum:
// no state of the quota could admit it.
type overPlanError struct {
	plan   plans.Plan
	radius float64
}

func (e *overPlanError) Error() string { return "request over the plan's maximum" }

// notInPlanError is a request for a layer or geofence set its caller's
// plan does not sell (cost.Model.SellsLayer, cost.Model.ForSet).
type notInPlanError struct{ plan, what, name string }

func (e *notInPlanError) Error() string {
	return fmt.Sprintf("plan %q does not include %s %q", e.plan, e.what, e.name)
}

// tooManyUnknownKeysError refuses a key lookup for an address that has
// presented too many unknown keys (see unknownKeyGuard).
type tooManyUnknownKeysError struct{ usage quota.LimitState }

func (e *tooManyUnknownKeysError) Error() string { return "too many unknown API keys" }

// tooManyAdminFailuresError refuses an admin request from an address that
// has failed to authenticate too often (see adminGuard).
type tooManyAdminFailuresError struct{ usage quota.LimitState }

func (e *tooManyAdminFailuresError) Error() string { return "too many failed admin authentications" }

// concurrencyError refuses a request while its caller has as many in
// progress as its plan allows.
type concurrencyError struct {
	plan plans.Plan
	held *quota.SlotsHeldError
}

func (e *concurrencyError) Error() string { return "too many requests in progress" }

// retryAfterConcurrency is the Retry-After of a concurrency-exceeded: a
// slot comes free when one of the caller's own requests ends, usually
// sooner than the lease that bounds the wait.
const retryAfterConcurrency = time.Second

// problemFor maps an error to the problem a client sees: the one place
// where errors become HTTP statuses. Unknown errors are a 500 whose detail
// hides the internals (they are logged instead).
func problemFor(err error) *problem {
	var (
		fe          *param.Error
		unknownPlan *unknownPlanError
		denied      *quotahttp.DeniedError
		tooCostly   *quota.TooCostlyError
		gateDown    *quotahttp.UnavailableError
		overPlan    *overPlanError
		unknownKeys *tooManyUnknownKeysError
		adminFails  *tooManyAdminFailuresError
		busy        *concurrencyError
		notInPlan   *notInPlanError
		expired     *expiredKeyError
		rotated     *rotatedKeyError
		refused     *access.Refusal
		badAccess   *invalidRestrictionsError
	)
	if p := tokenProblem(err); p != nil {
		return p
	}
	switch {
	case errors.As(err, &fe):
		p := newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", fe.Error())
		p.Field = fe.Field
		return p
	case errors.Is(err, errMissingKey):
		return newProblem(http.StatusUnauthorized, "missing-key", "API key required", "send the API key in X-API-Key or Authorization: Bearer")
	case errors.Is(err, errNoClientAddress):
		return newProblem(http.StatusBadRequest, "no-client-address", "No client address", "the client address could not be read, and the request has no API key")
	case errors.Is(err, keys.ErrUnknown):
		return newProblem(http.StatusUnauthorized, "unknown-key", "Unknown API key", "the API key is not known: check X-API-Key or Authorization: Bearer")
	case errors.As(err, &expired):
		p := newProblem(http.StatusUnauthorized, "expired-key", "Expired API key", expired.Error()+"; the request was not charged")
		p.ExpiredAt = expired.at.UTC().Format(time.RFC3339)
		return p
	case errors.As(err, &rotated):
		return newProblem(http.StatusUnauthorized, "rotated-key", "Rotated API key", rotated.Error()+"; use the key's new secret")
	case errors.Is(err, errSecretKeyInBrowser):
		return newProblem(http.StatusForbidden, "secret-key-in-browser", "Secret key in a browser",
			"a secret key (tk_sec_) belongs on a server, and this request carries an Origin header, as browsers send: "+
				"use a publishable key (tk_pub_) in web pages; the request was not charged")
	case errors.Is(err, keys.ErrRevoked):
		return newProblem(http.StatusForbidden, "revoked-key", "Revoked API key", "the API key has been revoked")
	case errors.Is(err, keys.ErrNotFound):
		return newProblem(http.StatusNotFound, "not-found", "Not found", "no API key has that id")
	case errors.Is(err, keys.ErrCustomerNotFound):
		return newProblem(http.StatusNotFound, "not-found", "Not found", "no customer has that id")
	case errors.Is(err, keys.ErrUnavailable):
		return unavailable("keys-unavailable", "Key store unavailable", "the API key could not be checked; retry shortly")
	case errors.As(err, &unknownPlan):
		return newProblem(http.StatusForbidden, "unknown-plan", "Plan not available", unknownPlan.Error())
	case errors.As(err, &unknownKeys):
		l := unknownKeys.usage
		p := newProblem(http.StatusTooManyRequests, "too-many-unknown-keys", "Too many unknown API keys",
			fmt.Sprintf("this address presented %d unknown API keys in the last %s; keys it has not used before are checked again once the oldest of those is %s old",
				l.Used, l.Limit.Window, l.Limit.Window))
		p.RetryAfterMS = max(ceilDiv(l.ResetAfter.Microseconds(), 1000), 1)
		return p
	case errors.As(err, &adminFails):
		l := adminFails.usage
		p := newProblem(http.StatusTooManyRequests, "too-many-admin-failures", "Too many failed admin authentications",
			fmt.Sprintf("this address failed to authenticate %d times in the last %s; its admin requests are refused until the oldest of those is %s old",
				l.Used, l.Limit.Window, l.Limit.Window))
		p.RetryAfterMS = max(ceilDiv(l.ResetAfter.Microseconds(), 1000), 1)
		return p
	case errors.As(err, &denied), errors.As(err, &tooCostly), errors.As(err, &gateDown):
		return fromGate(quotahttp.ProblemFor(err))
	case errors.As(err, &busy):
		p := newProblem(http.StatusTooManyRequests, "concurrency-exceeded", "Too many requests in progress",
			fmt.Sprintf("plan %q allows %d requests of one key in progress at once; retry when one has finished", busy.plan.Name, busy.held.Max))
		p.Limit = "in-flight"
		p.RetryAfterMS = min(busy.held.Expires, retryAfterConcurrency).Milliseconds()
		p.RetryAfterMS = max(p.RetryAfterMS, 1)
		return p
	case errors.As(err, &overPlan):
		return overPlan.problem()
	case errors.As(err, &notInPlan):
		return newProblem(http.StatusForbidden, "not-in-plan", "Not in the plan",
			notInPlan.Error()+"; the request was not charged")
	case errors.As(err, &refused):
		return refusalProblem(refused)
	case errors.As(err, &badAccess):
		return newProblem(http.StatusForbidden, "invalid-restrictions", "Key misconfigured",
			"the key's restrictions could not be read, so the key is refused; its owner can set them again; the request was not charged")
	case errors.Is(err, geofence.ErrTimeout) || errors.Is(err, tiles.ErrTimeout):
		return newProblem(http.StatusGatewayTimeout, "query-timeout", "Query timed out", "the query took longer than the server allows; the request was not charged")
	case errors.Is(err, geofence.ErrUnavailable) || errors.Is(err, tiles.ErrUnavailable):
		return unavailable("database-unavailable", "Database unavailable", "the database could not be reached; the request was not charged; retry shortly")
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this, but the log does.
		return newProblem(statusClientClosed, "client-closed", "Client closed the request", "the client went away before the response; the request was not charged")
	case errors.Is(err, errRouteNotFound):
		return newProblem(http.StatusNotFound, "not-found", "Not found", "no such route; see /openapi.json")
	case errors.Is(err, errMethodNotAllowed):
		return newProblem(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", "see /openapi.json")
	case errors.Is(err, errAdminDisabled):
		return newProblem(http.StatusNotFound, "not-found", "Not found", "the admin API is disabled: set TILEAPI_ADMIN_TOKEN")
	case errors.Is(err, errUsageUnavailable):
		return unavailable("usage-unavailable", "Usage history unavailable", "the usage history could not be read from the database; retry shortly")
	case errors.Is(err, errAdminToken):
		return newProblem(http.StatusUnauthorized, "admin-token-required", "Admin token required", "send Authorization: Bearer <TILEAPI_ADMIN_TOKEN>")
	}
	return newProblem(http.StatusInternalServerError, "internal", "Internal error", "the server failed; the request was not charged")
}

// refusalCodes are the problem codes of the refusals of a key's
// restrictions, by the dimension refused.
var refusalCodes = map[access.Dimension]struct{ code, title string }{
	access.DimOrigin:  {"origin-not-allowed", "Origin not allowed for this key"},
	access.DimNetwork: {"network-not-allowed", "Network not allowed for this key"},
	access.DimRoute:   {"route-not-allowed", "Route not allowed for this key"},
	access.DimLayer:   {"layer-not-allowed", "Layer not allowed for this key"},
	access.DimSet:     {"set-not-allowed", "Geofence set not allowed for this key"},
}

// refusalProblem is the 403 of a request a key's restrictions refuse;
// field names the restriction (its JSON field).
func refusalProblem(e *access.Refusal) *problem {
	c := refusalCodes[e.Dimension]
	detail := e.Reason
	if e.Value != "" {
		detail += fmt.Sprintf(": %q", e.Value)
	}
	p := newProblem(http.StatusForbidden, c.code, c.title, detail+"; the request was not charged")
	p.Field = string(e.Dimension)
	return p
}

// statusClientClosed is the status logged for a request whose client went
// away (nginx's 499): it is no failure of the server.
const statusClientClosed = 499

// unavailable is the 503 of a failing dependency.
func unavailable(code, title, detail string) *problem {
	p := newProblem(http.StatusServiceUnavailable, code, title, detail)
	p.RetryAfterMS = retryAfterDependency.Milliseconds()
	return p
}

// problem is the 422 of a radius over the plan.
func (e *overPlanError) problem() *problem {
	p := newProblem(http.StatusUnprocessableEntity, "radius-exceeds-plan", "Radius larger than the plan allows",
		fmt.Sprintf("radius %g m is above plan %q's maximum of %g m", e.radius, e.plan.Name, e.plan.MaxRadius))
	p.Field, p.MaxRadius = "radius", min(e.plan.MaxRadius, e.plan.Cost.LargestRadius(e.plan.Quota.MaxCost()))
	return p
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *problem) {
	// A 401 says how to authenticate (RFC 9110 section 11.6.1): the API key
	// as a bearer token, or in X-API-Key. The admin API sets its own.
	if p.Status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Add("WWW-Authenticate", `Bearer realm="tileapi"`)
		w.Header().Add("WWW-Authenticate", `APIKey realm="tileapi", header="X-API-Key"`)
	}
	p.Problem.Write(w, p)
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
