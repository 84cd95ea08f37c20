package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tileapi/tileapi/internal/billing"
	"github.com/tileapi/tileapi/internal/param"
)

// handleUsageExport serves GET /admin/usage/export?from=&to=&format=
// [&key=|&customer=]: the usage of the closed hours of the range as
// events for a billing system (see package billing), in CloudEvents
// (the default), CSV or Stripe meter events. The same range exported
// again is the same bytes, ids included.
func (s *Server) handleUsageExport(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	f := billing.CloudEvents
	var err error
	if v.Has("format") {
		if f, err = billing.ParseFormat(v.Get("format")); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	q, err := billing.ParseQuery(v.Get("from"), v.Get("to"), time.Now(), billing.DefaultGrace)
	if err == nil {
		q.KeyID, err = positiveParam(v, "key")
	}
	if err == nil {
		q.CustomerID, err = positiveParam(v, "customer")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	events, err := s.cfg.Billing.Events(r.Context(), q, f.Settled())
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", errUsageUnavailable, err))
		return
	}
	// Written whole before the status, so a failure is a problem, never
	// half an export under a 200.
	var b bytes.Buffer
	if err := billing.Write(&b, f, events, billing.Options{}); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", f.ContentType())
	w.Header().Set("Cache-Control", "no-store")
	_, _ = b.WriteTo(w)
}

// positiveParam reads the optional query parameter name as an id: 0 if
// it is absent.
func positiveParam(v url.Values, name string) (int64, error) {
	if !v.Has(name) {
		return 0, nil
	}
	n, err := param.Int(name, v.Get(name))
	if err == nil && n <= 0 {
		err = param.Invalid(name, "must be a positive id")
	}
	return n, err
}
