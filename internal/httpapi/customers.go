package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/param"
)

// The admin API of customers (issue 24): a customer has a plan that every
// request of its keys must fit beside the key's own (see planOf), and no
// secret.

// customerJSON is a customer as the admin API shows it.
type customerJSON struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Plan      string    `json:"plan"`
	CreatedAt time.Time `json:"created_at"`
	// Usage is the customer's usage of each limit of its plan, for GET
	// /admin/customers/{id}.
	Usage *usage `json:"usage,omitempty"`
}

func customerOf(c keys.Customer) customerJSON {
	return customerJSON{ID: c.ID, Name: c.Name, Plan: c.Plan, CreatedAt: c.CreatedAt}
}

// customerRequest is the body of POST /admin/customers.
type customerRequest struct {
	Name string `json:"name"`
	Plan string `json:"plan"`
}

// handleCreateCustomer serves POST /admin/customers {"name": "acme",
// "plan": "pro"}: the new customer.
func (s *Server) handleCreateCustomer(w http.ResponseWriter, r *http.Request) {
	var req customerRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProblem(w, problemFor(param.Invalid("body", "must be a JSON object with name and plan")))
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		writeProblem(w, problemFor(param.Invalid("name", "is required: a name for people")))
		return
	}
	if _, err := s.cfg.Plans.CustomerPlan(req.Plan); err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	c, err := s.cfg.KeyAdmin.CreateCustomer(r.Context(), req.Name, req.Plan)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, customerOf(c))
}

// handleListCustomers serves GET /admin/customers.
func (s *Server) handleListCustomers(w http.ResponseWriter, r *http.Request) {
	cs, err := s.cfg.KeyAdmin.ListCustomers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]customerJSON, len(cs))
	for i, c := range cs {
		out[i] = customerOf(c)
	}
	writeJSON(w, http.StatusOK, map[string]any{"customers": out})
}

// handleGetCustomer serves GET /admin/customers/{id}: the customer with
// its usage of each limit of its plan, what all its keys spent together.
func (s *Server) handleGetCustomer(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	c, err := s.cfg.KeyAdmin.GetCustomer(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := s.customerPlan(c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.quota.Peek(r.Context(), CustomerIdentity(c.ID), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := customerOf(c)
	u := usageOf(c.Plan, d)
	j.Usage = &u
	writeJSON(w, http.StatusOK, j)
}

// handleSetCustomerPlan serves PUT /admin/customers/{id}/plan {"plan":
// "pro"}: every key of the customer is held to the new plan on every
// server within the key index's refresh interval. The customer's usage
// stays: its windows are measured over the charges already made.
func (s *Server) handleSetCustomerPlan(w http.ResponseWriter, r *http.Request) {
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
	if _, err := s.cfg.Plans.CustomerPlan(req.Plan); err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	c, err := s.cfg.KeyAdmin.SetCustomerPlan(r.Context(), id, req.Plan)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.keysChanged(r.Context())
	writeJSON(w, http.StatusOK, customerOf(c))
}

// handleRenameCustomer serves PUT /admin/customers/{id}/name {"name":
// "Acme Ltd"}: the name is for people only, so its keys and usage stay.
func (s *Server) handleRenameCustomer(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProblem(w, problemFor(param.Invalid("body", "must be a JSON object with name")))
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		writeProblem(w, problemFor(param.Invalid("name", "is required: a name for people")))
		return
	}
	c, err := s.cfg.KeyAdmin.RenameCustomer(r.Context(), id, req.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, customerOf(c))
}
