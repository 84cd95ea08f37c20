package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/quota"
)

// adminFailures is how many failed admin authentications one client
// address may make in a minute, on each server.
const adminFailures = 10

// adminGuard authenticates admin requests. The token is compared by its
// SHA-256 digest, in constant time, so the time a comparison takes shows
// neither its bytes nor its length. Each client address (the one the
// anonymous quota counts, see clientNetwork) may fail adminFailures times
// in a minute: every admin request charges one unit to its address before
// the token is compared, and the right token gives it back, so concurrent
// guesses cannot overrun the allowance; an address whose allowance is spent
// gets a 429 without a comparison. The failures are counted in this
// process, so each server allows its own.
type adminGuard struct {
	digest   [sha256.Size]byte
	failures *quota.Memory
	plan     quota.Plan
}

// newAdminGuard returns the guard of token, nil for none: the admin API
// disabled.
func newAdminGuard(token string) (*adminGuard, error) {
	if token == "" {
		return nil, nil
	}
	p, err := quota.NewPlan("admin-failures", quota.Limit{Name: "minute", Max: adminFailures, Window: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("httpapi: admin failures: %w", err)
	}
	return &adminGuard{digest: sha256.Sum256([]byte(token)), failures: quota.NewMemory(nil), plan: p}, nil
}

// matches reports whether token is the admin token.
func (g *adminGuard) matches(token string) bool {
	presented, want := g.compared(token)
	return subtle.ConstantTimeCompare(presented, want) == 1
}

// compared returns what matches compares: the digests of token and of the
// admin token, of one length whatever token's. ConstantTimeCompare answers
// at once for inputs of different lengths, so comparing the tokens
// themselves would show a guesser the token's length.
func (g *adminGuard) compared(token string) (presented, want []byte) {
	d := sha256.Sum256([]byte(token))
	return d[:], g.digest[:]
}

// requireAdmin admits requests bearing the admin token; with no token
// configured the admin API does not exist.
func (s *Server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := s.adminGuard
		if g == nil || s.cfg.KeyAdmin == nil {
			writeProblem(w, problemFor(errAdminDisabled))
			return
		}
		// A request whose address cannot be read is counted with every
		// other such request.
		network, _ := s.clientNetwork(r.Context())
		d, err := g.failures.Charge(r.Context(), "admin-failures:"+network, g.plan, 1)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !d.Allowed {
			writeProblem(w, problemFor(&tooManyAdminFailuresError{usage: d.Limits[0]}))
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !g.matches(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tileapi-admin"`)
			writeProblem(w, problemFor(errAdminToken))
			return
		}
		// Only failures count.
		if _, err := g.failures.Refund(r.Context(), d.Receipt); err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// keyJSON is an API key as the admin API shows it: never its secret.
type keyJSON struct {
	ID        int64      `json:"id"`
	Prefix    string     `json:"prefix"`
	Kind      keys.Kind  `json:"kind"`
	Name      string     `json:"name"`
	Plan      string     `json:"plan"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Overrides are the key's own changes to its plan (plans.Overrides).
	Overrides json.RawMessage `json:"overrides,omitempty"`
	// ExpiresAt is when the key stops working; none for never.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// PreviousValidUntil is, for a rerolled key, when its secret before the
	// last reroll stops (or stopped) working.
	PreviousValidUntil *time.Time `json:"previous_valid_until,omitempty"`
	// Restrictions are where and for what the key works
	// (access.Restrictions).
	Restrictions json.RawMessage `json:"restrictions,omitempty"`
	// CustomerID is the customer the key belongs to; none for none.
	CustomerID *int64 `json:"customer_id,omitempty"`
}

func keyOf(k keys.Key) keyJSON {
	j := keyJSON{ID: k.ID, Prefix: k.Prefix, Kind: k.Kind(), Name: k.Name, Plan: k.Plan, CreatedAt: k.CreatedAt, Overrides: k.Overrides, Restrictions: k.Restrictions}
	if k.CustomerID != 0 {
		j.CustomerID = &k.CustomerID
	}
	if k.Revoked() {
		j.RevokedAt = &k.RevokedAt
	}
	if !k.ExpiresAt.IsZero() {
		j.ExpiresAt = &k.ExpiresAt
	}
	if !k.PreviousValidUntil.IsZero() {
		j.PreviousValidUntil = &k.PreviousValidUntil
	}
	return j
}

// handleCreateKey serves POST /admin/keys {"name": "...", "plan": "free",
// "kind": "secret", "customer_id": 3}: the new key, and its secret, shown
// this once. The kind, "publishable" or "secret", defaults to secret; the
// customer to none.
func (s *Server) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name       string          `json:"name"`
		Plan       string          `json:"plan"`
		Kind       string          `json:"kind"`
		CustomerID json.RawMessage `json:"customer_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProblem(w, problemFor(param.Invalid("body", "must be a JSON object with name and plan")))
		return
	}
	customerID, err := customerIDOf(req.CustomerID)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	if err := s.checkPlan(req.Plan); err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	kind := keys.Secret
	if req.Kind != "" {
		var err error
		if kind, err = keys.ParseKind(req.Kind); err != nil {
			writeProblem(w, problemFor(param.Invalid("kind", "must be %q or %q", keys.Publishable, keys.Secret)))
			return
		}
	}
	k, secret, err := s.cfg.KeyAdmin.CreateKind(r.Context(), kind, req.Name, req.Plan, customerID)
	if err != nil {
		s.fail(w, r, customerField(err, customerID))
		return
	}
	s.keysChanged(r.Context())
	writeWithSecret(w, http.StatusCreated, k, secret)
}

// writeWithSecret answers key k with its secret, shown this once.
func writeWithSecret(w http.ResponseWriter, status int, k keys.Key, secret string) {
	writeJSON(w, status, struct {
		keyJSON
		Secret string `json:"secret"`
	}{keyOf(k), secret})
}

// handleListKeys serves GET /admin/keys.
func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.cfg.KeyAdmin.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]keyJSON, len(ks))
	for i, k := range ks {
		out[i] = keyOf(k)
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

// handleGetKey serves GET /admin/keys/{id}.
func (s *Server) handleGetKey(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) { writeJSON(w, http.StatusOK, keyOf(k)) })
}

// handleRevokeKey serves DELETE /admin/keys/{id}: the key stops working
// within the key cache's lifetime (seconds).
func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	k, err := s.cfg.KeyAdmin.Revoke(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, keyOf(k))
}

// handleSetPlan serves PUT /admin/keys/{id}/plan {"plan": "pro"}.
func (s *Server) handleSetPlan(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	var req struct {
		Plan string `json:"plan"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProblem(w, problemFor(param.Invalid("body", "must be a JSON object with plan")))
		return
	}
	if err := s.checkPlan(req.Plan); err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	k, err := s.cfg.KeyAdmin.SetPlan(r.Context(), id, req.Plan)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, keyOf(k))
}

// handleSetCustomer serves PUT /admin/keys/{id}/customer {"customer_id":
// 3}, or {"customer_id": null} for none: every request of the key must
// then fit its customer's plan too, on every server within the key
// index's refresh interval. The key's own sliding windows start anew (its
// quota identity changes, see KeyIdentity).
func (s *Server) handleSetCustomer(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	var req map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req == nil {
		writeProblem(w, problemFor(param.Invalid("body", "must be a JSON object with customer_id: a customer's id, or null for none")))
		return
	}
	raw, ok := req["customer_id"]
	if !ok {
		writeProblem(w, problemFor(param.Invalid("customer_id", "is missing: a customer's id, or null for none")))
		return
	}
	customerID, err := customerIDOf(raw)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	k, err := s.cfg.KeyAdmin.SetCustomer(r.Context(), id, customerID)
	if err != nil {
		s.fail(w, r, customerField(err, customerID))
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, keyOf(k))
}

// customerIDOf is the customer id a request gives a key, as JSON: 0 for
// none (absent or null), or a positive id.
func customerIDOf(raw json.RawMessage) (int64, error) {
	var id *int64
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &id); err != nil || (id != nil && *id < 1) {
			return 0, param.Invalid("customer_id", "must be a customer's id, a positive integer, or null for none")
		}
	}
	if id == nil {
		return 0, nil
	}
	return *id, nil
}

// customerField is err, a failure to give a key the customer id, as a 400
// naming customer_id where no customer has that id.
func customerField(err error, id int64) error {
	if errors.Is(err, keys.ErrCustomerNotFound) {
		return param.Invalid("customer_id", "no customer has id %d; GET /admin/customers lists them", id)
	}
	return err
}

// handleSetOverrides serves PUT /admin/keys/{id}/overrides with the JSON of
// plans.Overrides: limits that replace or add to the key's plan's, and its
// in-flight limit. They take effect on every server within the key index's
// refresh interval; a bad override is a 400 naming it.
func (s *Server) handleSetOverrides(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.fail(w, r, param.Invalid("body", "could not be read: %v", err))
			return
		}
		o, err := plans.ParseOverrides(body)
		if err == nil && o.IsZero() {
			err = param.Invalid("overrides", "change nothing; DELETE them instead")
		}
		if err == nil {
			err = s.checkOverrides(k, o)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		canonical, err := json.Marshal(o)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.storeOverrides(w, r, k.ID, canonical)
	})
}

// handleDeleteOverrides serves DELETE /admin/keys/{id}/overrides: the key
// goes back to its plan alone.
func (s *Server) handleDeleteOverrides(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) { s.storeOverrides(w, r, k.ID, nil) })
}

// handleSetRestrictions serves PUT /admin/keys/{id}/restrictions with the
// JSON of access.Restrictions: the origins, networks, routes, layers and
// sets the key works for. They take effect on every server within the key
// index's refresh interval; a bad one is a 400 naming its field.
func (s *Server) handleSetRestrictions(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.fail(w, r, param.Invalid("body", "could not be read: %v", err))
			return
		}
		rs, err := access.Parse(body)
		if err == nil && rs.IsZero() {
			err = param.Invalid("restrictions", "restrict nothing; DELETE them instead")
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.storeRestrictions(w, r, k.ID, rs.JSON())
	})
}

// handleDeleteRestrictions serves DELETE /admin/keys/{id}/restrictions:
// the key works anywhere, for anything its plan sells.
func (s *Server) handleDeleteRestrictions(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) { s.storeRestrictions(w, r, k.ID, nil) })
}

func (s *Server) storeRestrictions(w http.ResponseWriter, r *http.Request, id int64, restrictions []byte) {
	k, err := s.cfg.KeyAdmin.SetRestrictions(r.Context(), id, restrictions)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, keyOf(k))
}

func (s *Server) storeOverrides(w http.ResponseWriter, r *http.Request, id int64, overrides []byte) {
	k, err := s.cfg.KeyAdmin.SetOverrides(r.Context(), id, overrides)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, keyOf(k))
}

// handleSetExpiry serves PUT /admin/keys/{id}/expiry {"expires_at":
// "2027-01-01T00:00:00Z"}, or {"expires_at": null} for never. The key is
// refused (401 expired-key) from that time on every server.
func (s *Server) handleSetExpiry(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	var req map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req == nil {
		writeProblem(w, problemFor(param.Invalid("body", `must be a JSON object with expires_at: an RFC 3339 time, or null for never`)))
		return
	}
	raw, ok := req["expires_at"]
	if !ok {
		writeProblem(w, problemFor(param.Invalid("expires_at", "is missing: an RFC 3339 time, or null for never")))
		return
	}
	var at time.Time
	if string(raw) != "null" {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			writeProblem(w, problemFor(param.Invalid("expires_at", "must be an RFC 3339 time as a string, or null for never")))
			return
		}
		if at, err = time.Parse(time.RFC3339, text); err != nil {
			writeProblem(w, problemFor(param.Invalid("expires_at", "%q is not an RFC 3339 time such as 2027-01-01T00:00:00Z", text)))
			return
		}
	}
	k, err := s.cfg.KeyAdmin.SetExpiry(r.Context(), id, at)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, keyOf(k))
}

// defaultOverlap is how long a rerolled key's old secret keeps working
// when the reroll does not say.
const defaultOverlap = 24 * time.Hour

// handleReroll serves POST /admin/keys/{id}/reroll {"overlap": "24h"}: a
// new secret for the same key, shown this once; the old one works on for
// the overlap (default 24h; "0s": it stops at once), then is refused (401
// rotated-key).
func (s *Server) handleReroll(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	var req struct {
		Overlap *string `json:"overlap"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && err != io.EOF {
		writeProblem(w, problemFor(param.Invalid("body", `must be a JSON object such as {"overlap": "24h"}, or empty`)))
		return
	}
	overlap := defaultOverlap
	if req.Overlap != nil {
		if overlap, err = time.ParseDuration(*req.Overlap); err != nil || overlap < 0 {
			writeProblem(w, problemFor(param.Invalid("overlap", "%q is not a duration of 0s or more, such as 24h", *req.Overlap)))
			return
		}
	}
	k, secret, err := s.cfg.KeyAdmin.Reroll(r.Context(), id, overlap)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeWithSecret(w, http.StatusOK, k, secret)
}

// checkOverrides reports overrides that do not make a valid plan of k's.
func (s *Server) checkOverrides(k keys.Key, o plans.Overrides) error {
	if _, ok := s.cfg.Plans.Lookup(k.Plan); !ok {
		return &unknownPlanError{plan: k.Plan}
	}
	_, err := s.cfg.Plans.KeyPlan(k.Plan, o)
	return err
}

// handleKeyUsage serves GET /admin/keys/{id}/usage.
func (s *Server) handleKeyUsage(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) {
		p, err := s.planOf(k)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		d, err := s.quota.Peek(r.Context(), KeyIdentity(k), p.Quota)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, usageOf(p.Name, d))
	})
}

// handleResetUsage serves DELETE /admin/keys/{id}/usage: forgets the key's
// charges.
func (s *Server) handleResetUsage(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) {
		if err := s.quota.Reset(r.Context(), KeyIdentity(k)); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// keysChanged applies a change made through this server to its key index
// at once; other servers apply it at their next refresh.
func (s *Server) keysChanged(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.KeyTimeout)
	defer cancel()
	if err := s.cfg.Keys.Refresh(ctx); err != nil {
		s.log.WarnContext(ctx, "key index refresh failed", "err", err)
	}
}

func (s *Server) withKey(w http.ResponseWriter, r *http.Request, f func(keys.Key)) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	k, err := s.cfg.KeyAdmin.Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f(k)
}

func (s *Server) checkPlan(name string) error {
	_, err := s.cfg.Plans.KeyPlan(name, plans.Overrides{})
	return err
}

// pathID is the id of the key or customer the path names.
func pathID(r *http.Request) (int64, error) {
	id, err := param.Int("id", chi.URLParam(r, "id"))
	if err != nil {
		return 0, err
	}
	if id < 1 {
		return 0, param.Invalid("id", "must be a positive integer")
	}
	return id, nil
}
