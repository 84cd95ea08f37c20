package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tileapi/tileapi/field"
	"github.com/tileapi/tileapi/keys"
)

// keyJSON is an API key as the admin API shows it: never its secret.
type keyJSON struct {
	ID        int64      `json:"id"`
	Prefix    string     `json:"prefix"`
	Name      string     `json:"name"`
	Plan      string     `json:"plan"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

func keyOf(k keys.Key) keyJSON {
	j := keyJSON{ID: k.ID, Prefix: k.Prefix, Name: k.Name, Plan: k.Plan, CreatedAt: k.CreatedAt}
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
	writeJSON(w, http.StatusOK, keyOf(k))
}

// handleKeyUsage serves GET /admin/keys/{id}/usage.
func (s *Server) handleKeyUsage(w http.ResponseWriter, r *http.Request) {
	s.withKey(w, r, func(k keys.Key) {
		p, ok := s.cfg.Plans.Lookup(k.Plan)
		if !ok {
			writeProblem(w, problemFor(field.Invalid("plan", "the key's plan %q is not configured", k.Plan)))
			return
		}
		d, err := s.cfg.Quota.Peek(r.Context(), keyIdentity(k.ID), p.Quota)
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
		if err := s.cfg.Quota.Reset(r.Context(), keyIdentity(k.ID)); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
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

// keyIdentity is the quota identity of an API key.
func keyIdentity(id int64) string { return fmt.Sprintf("key:%d", id) }
