package billing

import (
	"time"

	"github.com/tileapi/tileapi/internal/param"
)

// DefaultGrace is how long after an hour ends it is taken as closed: the
// servers write their usage every second (TILEAPI_LEDGER_FLUSH), and a
// request that began in the hour may settle after it ends.
const DefaultGrace = 5 * time.Minute

// Query selects the usage exported: the hours (and, past the hourly
// retention, the days) that start in [From, To), of one key or of one
// customer's keys (a zero ID selects every key).
type Query struct {
	From, To          time.Time
	KeyID, CustomerID int64
}

// ParseQuery reads the range of an export: from (required) and to
// (default: now), each an RFC 3339 time on the hour or a date
// (2026-11-01, its midnight UTC), to after from. The hours still open at
// now, and those that closed less than grace ago, are left out: to is
// lowered to the start of the first of them, so an export never sends an
// hour whose units may still grow (the receiver would keep the first
// figure it got for an id and drop the final one as a duplicate). An
// error is a *param.Error naming "from" or "to".
func ParseQuery(from, to string, now time.Time, grace time.Duration) (Query, error) {
	var q Query
	var err error
	if from == "" {
		return q, param.Invalid("from", "is required: an RFC 3339 time on the hour, such as 2026-11-01T00:00:00Z, or a date")
	}
	if q.From, err = parseHour("from", from); err != nil {
		return q, err
	}
	closed := now.Add(-grace).UTC().Truncate(time.Hour)
	q.To = closed
	if to != "" {
		if q.To, err = parseHour("to", to); err != nil {
			return q, err
		}
		if !q.To.After(q.From) {
			return q, param.Invalid("to", "must be after from (%s)", q.From.Format(time.RFC3339))
		}
		if q.To.After(closed) {
			q.To = closed
		}
	}
	return q, nil
}

// parseHour reads the value of field as a date or an RFC 3339 time on
// the hour, in UTC.
func parseHour(field, s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, param.Invalid(field, "must be an RFC 3339 time on the hour, such as 2026-11-01T00:00:00Z, or a date such as 2026-11-01")
	}
	if t = t.UTC(); !t.Equal(t.Truncate(time.Hour)) {
		return t, param.Invalid(field, "must be on the hour (the usage is kept per hour), such as %s", t.Truncate(time.Hour).Format(time.RFC3339))
	}
	return t, nil
}
