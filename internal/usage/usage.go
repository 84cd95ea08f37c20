// Package usage holds a key's usage history: what each quota identity used
// per UTC hour (rolled up to days past a retention), per route and layer or
// geofence set, and the reader of it. The rows are written by the usage
// ledger (internal/ledger) to the usage_hourly and usage_daily tables
// (migrations/00011_usage_history.sql, 00013_usage_overage.sql), or held in process in embedded mode.
package usage

import (
	"context"
	"fmt"
	"time"
)

// Row is the usage of one identity in one hour or day, route and layer; a
// row of a grouped Query sums the rows it groups.
type Row struct {
	Identity   string
	KeyID      int64 // 0 for a request without a key
	CustomerID int64 // 0 for none
	Start      time.Time
	Route      string
	Layer      string
	Requests   int64 // metered requests answered (any status)
	Charged    int64 // units charged up front
	GivenBack  int64 // units returned by refunds and settlements
	Unmetered  int64 // units of requests served unmetered (fail-open)
	// Overage is the units charged past the max of a soft cap (a plan's
	// overage), as settled: a part of Settled, which a refund or
	// settlement takes its units off first.
	Overage    int64
	Refused429 int64
	Refused422 int64
}

// Settled returns the units the row's requests cost as settled: what was
// charged less what was given back.
func (r Row) Settled() int64 { return r.Charged - r.GivenBack }

// Spans of Query.By.
const (
	ByHour = "hour"
	ByDay  = "day"
)

// Groupings of Query.Group.
const (
	GroupNone  = ""
	GroupRoute = "route"
	GroupLayer = "layer"
)

// Query selects usage: of a key, or of a customer's keys (a zero ID
// selects every key), in [From, To), summed per hour or day (By) and per
// route, layer, or neither (Group).
type Query struct {
	KeyID, CustomerID int64
	From, To          time.Time
	By                string
	Group             string
}

// Reader reads usage history.
type Reader interface {
	Usage(ctx context.Context, q Query) ([]Row, error)
}

// Recorder takes the usage of requests to keep: rows of one identity,
// hour, route and layer, added up with the rows of the same four.
type Recorder interface {
	AddUsage(Row)
}

// Discard is a Recorder that keeps nothing: the usage history turned off
// (tileapi serve -usage=false).
var Discard Recorder = discard{}

type discard struct{}

func (discard) AddUsage(Row) {}

// Add adds the counts of o to r.
func (r *Row) Add(o Row) {
	r.Requests += o.Requests
	r.Charged += o.Charged
	r.GivenBack += o.GivenBack
	r.Unmetered += o.Unmetered
	r.Overage += o.Overage
	r.Refused429 += o.Refused429
	r.Refused422 += o.Refused422
}

// Hour returns the start of t's UTC hour, the Start of a recorded row.
func Hour(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }

// Key is what rows are added up by: an identity's hour, route and layer.
type Key struct {
	Identity     string
	Start        time.Time
	Route, Layer string
}

// KeyOf returns r's Key.
func KeyOf(r Row) Key {
	return Key{Identity: r.Identity, Start: r.Start, Route: r.Route, Layer: r.Layer}
}

// The spans of a Query: the longest, and the default.
const (
	MaxHourSpan     = 31 * 24 * time.Hour
	MaxDaySpan      = 400 * 24 * time.Hour
	DefaultHourSpan = 24 * time.Hour
	DefaultDaySpan  = 30 * 24 * time.Hour
)

// Fill sets the zero fields of q's span to their defaults: By hour, To
// now, From DefaultHourSpan (by hour) or DefaultDaySpan (by day) before
// To.
func (q *Query) Fill(now time.Time) {
	if q.By == "" {
		q.By = ByHour
	}
	if q.To.IsZero() {
		q.To = now.UTC()
	}
	if q.From.IsZero() {
		span := DefaultHourSpan
		if q.By == ByDay {
			span = DefaultDaySpan
		}
		q.From = q.To.Add(-span)
	}
}

// Check returns an error naming the field of q that is invalid ("by",
// "group", "to", "from"), a *FieldError: To must follow From by at most
// MaxHourSpan (by hour) or MaxDaySpan (by day).
func (q Query) Check() error {
	maxSpan := MaxHourSpan
	if q.By == ByDay {
		maxSpan = MaxDaySpan
	}
	switch {
	case q.By != ByHour && q.By != ByDay:
		return &FieldError{Field: "by", Reason: `must be "hour" or "day"`}
	case q.Group != GroupNone && q.Group != GroupRoute && q.Group != GroupLayer:
		return &FieldError{Field: "group", Reason: `must be "route", "layer" or empty`}
	case !q.To.After(q.From):
		return &FieldError{Field: "to", Reason: "must be after from"}
	case q.To.Sub(q.From) > maxSpan:
		return &FieldError{Field: "from", Reason: fmt.Sprintf("must be at most %d days before to by %s", maxSpan/(24*time.Hour), q.By)}
	}
	return nil
}

// FieldError says which field of a Query is invalid.
type FieldError struct {
	Field, Reason string
}

func (e *FieldError) Error() string { return "usage: invalid " + e.Field + ": " + e.Reason }
