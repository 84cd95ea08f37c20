package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tileapi/tileapi/field"
	"github.com/tileapi/tileapi/keys"
	"github.com/tileapi/tileapi/plans"
)

// keyJSON is an API key as the admin API shows it: never its secret.
type keyJSON struct {
	ID        int64      `json:"id"`
	Prefix    string     `json:"prefix"`
	Name      string     `json:"name"`
	Plan      string     `json:"plan"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Overrides are the key's own changes to its plan (plans.Overrides).
	Overrides json.RawMessage `json:"overrides,omitempty"`
}

func keyOf(k keys.Key) keyJSON {
	j := keyJSON{ID: k.ID, Prefix: k.Prefix, Name: k.Name, Plan: k.Plan, CreatedAt: k.CreatedAt, Overrides: k.Overrides}
	if k.Revoked() {
		j.RevokedAt = &k.RevokedAt
	}
	return j
}

// handleCreateKey serves POST /admin/keys {"name": "...", "plan": "free"}:
// the new key, and its secret, shown this once.
func (s *Server) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
		Plan string `json:"plan"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProblem(w, problemFor(field.Invalid("body", "must be a JSON object with name and plan")))
		return
	}
	if err := s.checkPlan(req.Plan); err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	k, secret, err := s.cfg.KeyAdmin.Create(r.Context(), req.Name, req.Plan)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusCreated, struct {
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
	id, err := keyID(r)
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
	id, err := keyID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	var req struct {
		Plan string `json:"plan"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProblem(w, problemFor(field.Invalid("body", "must be a JSON object with plan")))
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

// handleSetOverrides serves PUT /admin/keys/{id}/overrides with the JSON of
// plans.Overrides: limits that replace or add to the key's plan's, and its
// in-flight limit. They take effect on every server within the key index's
// refresh interval; a bad override is a 400 naming it.
func (s *Server) handleSetOverrides(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.fail(w, r, field.Invalid("body", "could not be read: %v", err))
			return
		}
		o, err := plans.ParseOverrides(body)
		if err == nil && o.IsZero() {
			err = field.Invalid("overrides", "change nothing; DELETE them instead")
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

func (s *Server) storeOverrides(w http.ResponseWriter, r *http.Request, id int64, overrides []byte) {
	k, err := s.cfg.KeyAdmin.SetOverrides(r.Context(), id, overrides)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, keyOf(k))
}

// checkOverrides reports overrides that do not make a valid plan of k's.
func (s *Server) checkOverrides(k keys.Key, o plans.Overrides) error {
	p, ok := s.cfg.Plans.Lookup(k.Plan)
	if !ok {
		return &unknownPlanError{plan: k.Plan}
	}
	_, err := p.With(o)
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
		d, err := s.quota.Peek(r.Context(), KeyIdentity(k.ID), p.Quota)
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
		if err := s.quota.Reset(r.Context(), KeyIdentity(k.ID)); err != nil {
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
	id, err := keyID(r)
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
	if _, ok := s.cfg.Plans.Lookup(name); !ok {
		return field.Invalid("plan", "must be one of %v", s.cfg.Plans.Names())
	}
	return nil
}

func keyID(r *http.Request) (int64, error) {
	id, err := field.Int("id", chi.URLParam(r, "id"))
	if err != nil {
		return 0, err
	}
	if id < 1 {
		return 0, field.Invalid("id", "must be a positive integer")
	}
	return id, nil
}
