// Package usage holds a key's usage history: what each quota identity used
// per UTC hour (rolled up to days past a retention), per route and layer or
// geofence set, and the reader of it. The rows are written by the usage
// ledger (internal/ledger) to the usage_hourly and usage_daily tables
// (migrations/00011_usage_history.sql), or held in process in embedded mode.
package usage

import (
	"context"
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
