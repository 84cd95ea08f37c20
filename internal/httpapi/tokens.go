package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/paulmach/orb"

	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/tokens"
	"github.com/tileapi/tileapi/quota"
)

// Short-lived tokens (issue 24): the owner's server exchanges a secret
// key for a token (POST /v1/tokens) that a web page presents like a key.
// A token is checked with no I/O: its signature, then its parent key from
// the key index by id. It is charged to the parent key (same identity,
// plan and budget) and may narrow it: routes, layers, sets, a box, and a
// budget of its own, charged beside the key's (withBudget).

// tokenRoutes are the names a token's routes may hold: a restriction's
// (access.Routes, accessRoute), but "tokens": a token cannot mint.
var tokenRoutes = slices.DeleteFunc(access.Routes(), func(r string) bool { return r == access.RouteTokens })

var (
	errTokensDisabled    = errors.New("short-lived tokens are disabled")
	errSecretKeyRequired = errors.New("a secret key is required to mint a token")
)

// tokenError is a presented token that does not verify (tokens.Verify's
// errors).
type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// outsideTokenError is a request outside what its token allows: field is
// the dimension (routes, layers, sets, bbox), name what was asked.
type outsideTokenError struct{ field, name string }

func (e *outsideTokenError) Error() string {
	return fmt.Sprintf("the token does not allow %s %q", strings.TrimSuffix(e.field, "s"), e.name)
}

// tokenProblem is the problem of a token's error, nil for another error.
func tokenProblem(err error) *problem {
	var (
		te      *tokenError
		expired *tokens.ExpiredError
		outside *outsideTokenError
	)
	switch {
	case errors.Is(err, errTokensDisabled):
		return newProblem(http.StatusNotFound, "tokens-disabled", "Tokens disabled", "short-lived tokens are disabled on this server: set TILEAPI_TOKEN_SECRET")
	case errors.Is(err, errSecretKeyRequired):
		return newProblem(http.StatusForbidden, "secret-key-required", "Secret key required",
			"a token is minted with a secret key, on the key owner's server: not with a publishable key nor with a token; the request was not charged")
	case errors.As(err, &expired):
		p := newProblem(http.StatusUnauthorized, "expired-token", "Expired token",
			"the token expired at "+expired.At.UTC().Format(time.RFC3339)+": mint another")
		p.ExpiredAt = expired.At.UTC().Format(time.RFC3339)
		return p
	case errors.As(err, &te):
		return newProblem(http.StatusUnauthorized, "invalid-token", "Invalid token", "the token is not valid: "+strings.TrimPrefix(te.Error(), "tokens: "))
	case errors.As(err, &outside) && outside.field == "bbox":
		p := newProblem(http.StatusForbidden, "outside-token-bounds", "Outside the token's bounds",
			"the token's bbox does not meet the "+outside.name+" asked for; the request was not charged")
		p.Field = "bbox"
		return p
	case errors.As(err, &outside):
		dim := strings.TrimSuffix(outside.field, "s")
		p := newProblem(http.StatusForbidden, dim+"-not-allowed", "Not allowed by the token", outside.Error()+"; the request was not charged")
		p.Field = outside.field
		return p
	}
	return nil
}

// newSigner is the Signer of secret, nil when secret is empty (tokens
// disabled).
func newSigner(secret string) (*tokens.Signer, error) {
	if secret == "" {
		return nil, nil
	}
	s, err := tokens.New([]byte(secret))
	if err != nil {
		return nil, fmt.Errorf("httpapi: token secret: %w", err)
	}
	return s, nil
}

// identifyToken is the caller of a presented token: its parent key's
// identity and plan, narrowed as the token says, with the token's budget
// if it has one.
func (s *Server) identifyToken(r *http.Request, token string) (caller, error) {
	if s.tokens == nil {
		return caller{}, &tokenError{err: errors.New("tokens are disabled on this server")}
	}
	claims, err := s.tokens.Verify(token)
	if err != nil {
		return caller{}, &tokenError{err: err}
	}
	k, err := s.parentKey(r.Context(), claims.KeyID)
	if err != nil {
		return caller{}, keyRefusal(k, err) // revoked or expired: as the key itself is refused
	}
	setLogKey(r.Context(), k.Prefix)
	p, err := s.planOf(k)
	if err != nil {
		return caller{}, err
	}
	if claims.Budget > 0 {
		p.Quota = withBudget(p.Quota, k, claims)
	}
	return caller{identity: KeyIdentity(k), plan: p, keyPrefix: k.Prefix, key: k, token: &claims}, nil
}

// withBudget is q, the quota plan of the token t's key k, with the token's
// budget as one more shared part: one sliding window of the token's
// lifetime, its budget at most, named plans.TokenLimit, in the token's own
// identity within k's group. Every request of the token must fit it too,
// in the same decision as the key's limits (and its customer's), so the
// token stops at its budget while its key goes on.
func withBudget(q quota.Plan, k keys.Key, t tokens.Claims) quota.Plan {
	budget := quota.Plan{Name: plans.TokenLimit, Limits: []quota.Limit{{Name: plans.TokenLimit, Max: t.Budget, Window: t.ExpiresAt.Sub(t.IssuedAt)}}}
	q.Shared = append(slices.Clip(q.Shared), quota.Shared{Identity: tokenIdentity(k, t.ID), Plan: budget})
	return q
}

// parentKey is the key of id from the key index. A key the index does not
// hold yet (made on another server since the last refresh) is read by a
// refresh, at most once a second: only a token whose signature is ours
// gets this far, so no flood of made-up tokens reaches the store.
func (s *Server) parentKey(ctx context.Context, id int64) (keys.Key, error) {
	k, err := s.cfg.Keys.FindByID(id)
	if !errors.Is(err, keys.ErrNotIndexed) {
		return k, err
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.KeyTimeout)
	defer cancel()
	if err := s.cfg.Keys.RefreshIfOlder(lctx, time.Second); err != nil {
		s.log.ErrorContext(ctx, "key refresh for a token's parent key failed", "key_id", id, "err", err)
		return keys.Key{}, err
	}
	k, err = s.cfg.Keys.FindByID(id)
	if errors.Is(err, keys.ErrNotIndexed) {
		return keys.Key{}, keys.ErrUnknown
	}
	return k, err
}

// tokenAllows refuses m if c's token does not allow it (a *outsideTokenError);
// a caller without a token is allowed anything here.
func (c caller) tokenAllows(m metered) error {
	t := c.token
	if t == nil {
		return nil
	}
	route := accessRoute(m)
	switch {
	case len(t.Routes) > 0 && !slices.Contains(t.Routes, route):
		return &outsideTokenError{field: "routes", name: route}
	case m.layer != "" && len(t.Layers) > 0 && !slices.Contains(t.Layers, m.layer):
		return &outsideTokenError{field: "layers", name: m.layer}
	case m.set != "" && len(t.Sets) > 0 && !slices.Contains(t.Sets, m.set):
		return &outsideTokenError{field: "sets", name: m.set}
	case m.where != nil && t.BBox != nil && !t.BBox.Bound().Intersects(*m.where):
		what := "tile"
		if m.where.Min == m.where.Max {
			what = "point"
		}
		return &outsideTokenError{field: "bbox", name: what}
	}
	return nil
}

// pointAt is the place of a query point, for metered.where.
func pointAt(lng, lat float64) *orb.Bound {
	b := orb.Point{lng, lat}.Bound()
	return &b
}

// tokenRequest is the body of POST /v1/tokens.
type tokenRequest struct {
	ttl time.Duration
	n   tokens.Narrowing
}

// parseTokenRequest reads the body of POST /v1/tokens: a JSON object of
// ttl ("15m"), routes, layers, sets, bbox and budget, each optional; a
// field that is unknown or bad is a *param.Error naming it. The budget's
// bound, the key's plan, is checked once the key is known
// (checkBudget).
func (s *Server) parseTokenRequest(r *http.Request) (tokenRequest, error) {
	var (
		req tokenRequest
		raw map[string]json.RawMessage
	)
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return req, param.Invalid("body", "want a JSON object of ttl, routes, layers, sets, bbox and budget, each optional")
	}
	if dec.More() {
		return req, param.Invalid("body", "want one JSON object")
	}
	fields := make([]string, 0, len(raw))
	for f := range raw {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		v := raw[f]
		var err error
		switch f {
		case "ttl":
			var ttl string
			if err = json.Unmarshal(v, &ttl); err == nil {
				req.ttl, err = time.ParseDuration(ttl)
			}
			if err != nil {
				return req, param.Invalid(f, "want a duration such as \"15m\", %s to %s", tokens.MinTTL, tokens.MaxTTL)
			}
		case "routes":
			err = json.Unmarshal(v, &req.n.Routes)
		case "layers":
			err = json.Unmarshal(v, &req.n.Layers)
		case "sets":
			err = json.Unmarshal(v, &req.n.Sets)
		case "bbox":
			req.n.BBox = new(tokens.BBox)
			err = json.Unmarshal(v, req.n.BBox)
		case "budget":
			if json.Unmarshal(v, &req.n.Budget) != nil || req.n.Budget < 1 {
				return req, param.Invalid(f, "want a positive whole number of units, at most the smallest maximum of the key's plan")
			}
		default:
			return req, param.Invalid(f, "unknown field; want ttl, routes, layers, sets, bbox or budget")
		}
		if err != nil {
			var fe *tokens.FieldError
			if errors.As(err, &fe) {
				return req, param.Invalid(fe.Field, "%s", fe.Reason)
			}
			return req, param.Invalid(f, "want a list of names")
		}
	}
	if err := tokens.CheckTTL(req.ttl); err != nil {
		return req, fieldError(err)
	}
	if err := req.n.Check(); err != nil {
		return req, fieldError(err)
	}
	for _, route := range req.n.Routes {
		if !slices.Contains(tokenRoutes, route) {
			return req, param.Invalid("routes", "unknown route %q; want some of %s", route, strings.Join(tokenRoutes, ", "))
		}
	}
	for _, l := range req.n.Layers {
		if _, err := s.cfg.Layers.Lookup(l); err != nil {
			return req, param.Invalid("layers", "unknown layer %q; GET /v1/tiles lists them", l)
		}
	}
	for _, set := range req.n.Sets {
		if _, ok := s.cfg.Sets.Lookup(set); !ok {
			return req, param.Invalid("sets", "unknown geofence set %q; GET /v1/geofence lists them", set)
		}
	}
	return req, nil
}

// checkBudget refuses a token budget above the smallest maximum of p, the
// plan of the key that mints the token (its customer's limits included):
// a budget is a lower one.
func checkBudget(budget int64, p plans.Plan) error {
	if most := p.Quota.MaxCost(); budget > most {
		return param.Invalid("budget", "%d units is above %d, the smallest maximum of the key's plan %q", budget, most, p.Name)
	}
	return nil
}

// fieldError is a *tokens.FieldError as a *param.Error.
func fieldError(err error) error {
	var fe *tokens.FieldError
	if errors.As(err, &fe) {
		return param.Invalid(fe.Field, "%s", fe.Reason)
	}
	return err
}

// handleMintToken serves POST /v1/tokens: a token of the presented secret
// key, narrowed as the body asks, metered as route "tokens" at the plan's
// flat price.
func (s *Server) handleMintToken(w http.ResponseWriter, r *http.Request) {
	secret := presentedKey(r)
	var err error
	switch {
	case s.tokens == nil:
		err = errTokensDisabled
	case secret == "":
		err = errMissingKey
	case keys.Declares(secret, keys.Publishable), strings.HasPrefix(secret, tokens.Prefix):
		err = errSecretKeyRequired
	}
	var req tokenRequest
	if err == nil {
		req, err = s.parseTokenRequest(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.gate(w, r, func(c caller) (metered, error) {
		if err := checkBudget(req.n.Budget, c.plan); err != nil {
			return metered{}, err
		}
		return metered{
			route: "tokens",
			cost:  c.plan.Cost.Flat,
			work: func(context.Context) (*response, error) {
				token, claims, err := s.tokens.Mint(c.key.ID, req.ttl, req.n)
				if err != nil {
					return nil, err
				}
				return jsonResponseWith(map[string]string{
					"token":      token,
					"expires_at": claims.ExpiresAt.UTC().Format(time.RFC3339),
				}, http.Header{"Cache-Control": {"no-store"}})
			},
		}, nil
	})
}
