package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tileapi/tileapi/field"
	"github.com/tileapi/tileapi/keys"
)

// problemBase prefixes every problem type: the page that explains it.
const problemBase = "https://tileapi.dev/problems/"

// problem is an RFC 9457 problem+json body. Code is the stable,
// machine-readable name of the problem; extension members carry what a
// client needs to act on it.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`

	Field        string  `json:"field,omitempty"`
	Limit        string  `json:"limit,omitempty"`
	Cost         int64   `json:"cost,omitempty"`
	MaxCost      int64   `json:"max_cost,omitempty"`
	RetryAfterMS int64   `json:"retry_after_ms,omitempty"`
	MaxRadius    float64 `json:"max_radius_m,omitempty"`
	LowestZoom   *int    `json:"lowest_zoom,omitempty"`
}

func newProblem(status int, code, title, detail string) *problem {
	return &problem{Type: problemBase + code, Title: title, Status: status, Detail: detail, Code: code}
}

// Error makes a problem an error, so handlers can return one.
func (p *problem) Error() string { return p.Title + ": " + p.Detail }

// problemFor maps an error to the problem a client sees: the one place
// where errors become HTTP statuses. Unknown errors are a 500 whose detail
// hides the internals (they are logged instead).
func problemFor(err error) *problem {
	var p *problem
	var fe *field.Error
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &fe):
		pr := newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", fe.Error())
		pr.Field = fe.Field
		return pr
	case errors.Is(err, keys.ErrUnknown):
		return newProblem(http.StatusUnauthorized, "unknown-key", "Unknown API key", "the API key is not known: check X-API-Key or Authorization: Bearer")
	case errors.Is(err, keys.ErrRevoked):
		return newProblem(http.StatusForbidden, "revoked-key", "Revoked API key", "the API key has been revoked")
	case errors.Is(err, keys.ErrNotFound):
		return newProblem(http.StatusNotFound, "not-found", "Not found", "no API key has that id")
	case isTimeout(err):
		return newProblem(http.StatusGatewayTimeout, "query-timeout", "Query timed out", "the query took longer than the server allows; the request was not charged")
	}
	return newProblem(http.StatusInternalServerError, "internal", "Internal error", "the server failed; the request was not charged")
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *problem) {
	if p.RetryAfterMS > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(ceilDiv(p.RetryAfterMS, 1000), 10))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// queryCanceled is PostgreSQL's SQLSTATE for a statement cancelled by its
// statement_timeout.
const queryCanceled = "57014"

// isTimeout reports a query cut short by the statement timeout or by its
// deadline.
func isTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &pgErr) && pgErr.Code == queryCanceled)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
