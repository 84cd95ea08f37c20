package httpapi

import (
	"context"
	"encoding/csv"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/param"
	usagehist "github.com/tileapi/tileapi/internal/usage"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// The usage history (internal/usage): every metered request adds to the
// row of its identity, hour, route and layer what it was charged, given
// back, charged past a soft cap (overage), served unmetered and refused. The hour is the request's: a
// refund, a settlement or a pending charge made after the answer lands in
// the row of its charge.

// usageRowKey carries a metered request's usage row (its identity, key,
// customer, hour, route and layer) to the gate's observer, which is handed
// the request and nothing of the route: the request's context is the
// only way there, and also what the gate keeps for its background
// retries.
type usageRowKey struct{}

// meterUsage serves m, the request of c, through the gate (serve), and
// records its usage: the charges and refunds the observer sees, then the
// request answered, how, and what was served unmetered.
func (s *Server) meterUsage(w http.ResponseWriter, r *http.Request, c caller, m metered, serve func(http.ResponseWriter, *http.Request)) {
	row := usagehist.Row{
		Identity: c.identity, KeyID: c.key.ID, CustomerID: c.key.CustomerID,
		Start: usagehist.Hour(s.cfg.Now()), Route: m.route, Layer: m.layer + m.set,
	}
	ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
	serve(ww, r.WithContext(context.WithValue(r.Context(), usageRowKey{}, row)))
	row.Requests = 1
	switch ww.Status() {
	case http.StatusTooManyRequests:
		row.Refused429 = 1
	case http.StatusUnprocessableEntity:
		row.Refused422 = 1
	}
	if st := ww.Header().Get(headerStatus); st == statusUnmetered || st == statusPending {
		row.Unmetered = m.cost
	}
	s.cfg.Usage.AddUsage(row)
}

// observeUsage adds to the request's usage row the units e charged or
// gave back.
func (s *Server) observeUsage(r *http.Request, e quotahttp.Event) {
	row, ok := r.Context().Value(usageRowKey{}).(usagehist.Row)
	if !ok {
		return // not a metered route's request: /v1/quota
	}
	switch e.Kind {
	case quotahttp.EventAllowed:
		// The receipt's cost, not the price: a cached tile's charge at the
		// miss price may be lowered to its own before the answer, in the
		// store, with no event (lowerTile).
		row.Charged, row.Overage = e.Decision.Receipt.Cost(), e.Decision.Receipt.Overage()
	case quotahttp.EventChargeApplied:
		row.Charged, row.Overage = e.Units, e.Overage
	case quotahttp.EventRefunded, quotahttp.EventSettled:
		// The overage as settled: what a give-back takes off it.
		row.GivenBack, row.Overage = e.Units, -e.Overage
	default:
		return
	}
	if row.Charged != 0 || row.GivenBack != 0 {
		s.cfg.Usage.AddUsage(row)
	}
}

// usageQuery reads from, to, by and group of r into a usage.Query, its
// defaults and bounds usage.Query's (Fill, Check). A bad value is a
// *param.Error naming its field.
func (s *Server) usageQuery(r *http.Request) (usagehist.Query, error) {
	v := r.URL.Query()
	q := usagehist.Query{By: v.Get("by"), Group: v.Get("group")}
	var err error
	if q.To, err = rfc3339("to", v.Get("to")); err != nil {
		return q, err
	}
	if q.From, err = rfc3339("from", v.Get("from")); err != nil {
		return q, err
	}
	q.Fill(s.cfg.Now())
	var fe *usagehist.FieldError
	if err := q.Check(); errors.As(err, &fe) {
		return q, param.Invalid(fe.Field, "%s", fe.Reason)
	}
	return q, nil
}

// rfc3339 reads s, the named field, as an RFC 3339 time; the zero time if
// empty.
func rfc3339(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, param.Invalid(name, "must be an RFC 3339 time such as 2026-03-10T00:00:00Z")
	}
	return t.UTC(), nil
}

// usageJSON is the answer of /v1/usage and /admin/usage.
type usageJSON struct {
	From  time.Time      `json:"from"`
	To    time.Time      `json:"to"`
	By    string         `json:"by"`
	Group string         `json:"group"`
	Rows  []usageRowJSON `json:"rows"`
	// Total sums the rows.
	Total usageCounts `json:"total"`
}

type usageRowJSON struct {
	Start      time.Time `json:"start"`
	Identity   string    `json:"identity"`
	KeyID      int64     `json:"key_id,omitempty"`
	CustomerID int64     `json:"customer_id,omitempty"`
	Route      string    `json:"route,omitempty"`
	Layer      string    `json:"layer,omitempty"`
	usageCounts
}

type usageCounts struct {
	Requests  int64 `json:"requests"`
	Charged   int64 `json:"units_charged"`
	GivenBack int64 `json:"units_given_back"`
	// Settled is Charged less GivenBack: what the requests cost.
	Settled   int64 `json:"units_settled"`
	Unmetered int64 `json:"units_unmetered"`
	// Overage is the part of Settled charged past a soft cap.
	Overage    int64 `json:"units_overage"`
	Refused429 int64 `json:"refused_429"`
	Refused422 int64 `json:"refused_422"`
}

func countsOf(r usagehist.Row) usageCounts {
	return usageCounts{Requests: r.Requests, Charged: r.Charged, GivenBack: r.GivenBack, Settled: r.Settled(),
		Unmetered: r.Unmetered, Overage: r.Overage, Refused429: r.Refused429, Refused422: r.Refused422}
}

// writeUsage answers q's rows: as CSV to a client that accepts text/csv
// (and not JSON first), else as JSON.
func writeUsage(w http.ResponseWriter, r *http.Request, q usagehist.Query, rows []usagehist.Row) {
	if acceptsCSV(r.Header.Get("Accept")) {
		writeUsageCSV(w, rows)
		return
	}
	out := usageJSON{From: q.From, To: q.To, By: q.By, Group: q.Group, Rows: make([]usageRowJSON, len(rows))}
	var total usagehist.Row
	for i, row := range rows {
		total.Add(row)
		out.Rows[i] = usageRowJSON{Start: row.Start, Identity: row.Identity, KeyID: row.KeyID, CustomerID: row.CustomerID,
			Route: row.Route, Layer: row.Layer, usageCounts: countsOf(row)}
	}
	out.Total = countsOf(total)
	writeJSON(w, http.StatusOK, out)
}

// acceptsCSV reports whether an Accept header names text/csv before
// application/json.
func acceptsCSV(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		switch mt, _, _ := strings.Cut(strings.TrimSpace(part), ";"); strings.TrimSpace(mt) {
		case "text/csv":
			return true
		case "application/json", "*/*":
			return false
		}
	}
	return false
}

// usageCSVHeader names the columns of the CSV form.
var usageCSVHeader = []string{"start", "identity", "key_id", "customer_id", "route", "layer", "requests",
	"units_charged", "units_given_back", "units_settled", "units_unmetered", "units_overage", "refused_429", "refused_422"}

func writeUsageCSV(w http.ResponseWriter, rows []usagehist.Row) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write(usageCSVHeader)
	id := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	for _, row := range rows {
		rec := []string{row.Start.Format(time.RFC3339), row.Identity, id(row.KeyID), id(row.CustomerID), row.Route, row.Layer}
		for _, n := range []int64{row.Requests, row.Charged, row.GivenBack, row.Settled(), row.Unmetered, row.Overage, row.Refused429, row.Refused422} {
			rec = append(rec, strconv.FormatInt(n, 10))
		}
		_ = cw.Write(rec) // a write error is the client's gone
	}
	cw.Flush()
}

// handleUsage serves GET /v1/usage: the usage history of the caller's
// key, not charged (like /v1/quota, and under its restrictions). A caller
// without a key has none to read.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	c, err := s.identify(r)
	if err == nil && c.key.ID == 0 {
		err = errMissingKey
	}
	if err == nil {
		err = s.checkAccess(r, c, access.RouteQuota, "", "")
		if err == nil {
			err = c.tokenAllows(metered{route: "quota"})
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := s.usageQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q.KeyID = c.key.ID
	s.answerUsage(w, r, q)
}

// handleAdminUsage serves GET /admin/usage: the usage history of a key
// (key=), a customer's keys (customer=), or everyone's.
func (s *Server) handleAdminUsage(w http.ResponseWriter, r *http.Request) {
	q, err := s.usageQuery(r)
	for _, f := range []struct {
		name string
		id   *int64
	}{{"key", &q.KeyID}, {"customer", &q.CustomerID}} {
		if v := r.URL.Query().Get(f.name); v != "" && err == nil {
			if *f.id, err = strconv.ParseInt(v, 10, 64); err != nil || *f.id <= 0 {
				err = param.Invalid(f.name, "must be a positive whole number, an id")
			}
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerUsage(w, r, q)
}

func (s *Server) answerUsage(w http.ResponseWriter, r *http.Request, q usagehist.Query) {
	rows, err := s.cfg.UsageReader.Usage(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeUsage(w, r, q, rows)
}
