// Package billing turns the usage history (usage_hourly, and usage_daily
// for the days past its retention) into events a billing system ingests:
// CloudEvents (OpenMeter), CSV, and Stripe meter events. Every event has an
// id decided by what it counts (the identity, the hour or day, the route,
// the layer and its kind), never by when it is exported, so an export run
// twice, or retried after a failure, sends the same ids and the receiver
// keeps each once.
package billing

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/tileapi/tileapi/internal/usage"
)

// Kind says what an event's units are.
type Kind string

// The kinds of event.
const (
	// Usage events carry the units charged in an hour or day (positive).
	Usage Kind = "usage"
	// Adjustment events carry the units given back in it, by refunds and
	// settlements (negative).
	Adjustment Kind = "adjustment"
	// Settled events carry the units as settled, charged less given back
	// (zero or positive): what the Stripe format sends, as one event.
	Settled Kind = "settled"
	// Overage events carry the part of the units as settled that went
	// past a soft cap (a plan's overage; positive): a split of the units
	// the other kinds carry, not more of them. Every format sends them
	// apart (their own CloudEvents type, Stripe event name, CSV kind), so
	// a meter of the units does not count them twice.
	Overage Kind = "overage"
)

// Event is the units of one kind one identity used in one hour (or day),
// route and layer.
type Event struct {
	ID         string    // stable: see EventID
	Kind       Kind      // usage, adjustment, settled or overage
	Period     string    // usage.ByHour, or usage.ByDay past the hourly retention
	Start      time.Time // the start of the UTC hour or day
	Identity   string    // the quota identity charged: "key:42", "{customer:7}key:42"
	KeyID      int64
	CustomerID int64 // 0 for a key without a customer
	Route      string
	Layer      string // the tile layer or geofence set; "" for none
	Units      int64  // negative for an adjustment
}

// Subject is whom the event bills: "customer:7" for a key with a
// customer, else "key:42".
func (e Event) Subject() string {
	if e.CustomerID != 0 {
		return "customer:" + strconv.FormatInt(e.CustomerID, 10)
	}
	return "key:" + strconv.FormatInt(e.KeyID, 10)
}

// idVersion starts every hashed id: a change of what an id hashes changes
// it, so ids of two schemes never collide.
const idVersion = "tileapi-usage-v1"

// EventID returns the id of the event of kind k counting identity's units
// in the period (an hour or a day) starting at start, on route and layer:
// the first 16 bytes of a SHA-256 of those fields, in hex. It depends on
// nothing else, above all not on the time of the export or the units, so
// a re-export of a closed hour sends the ids it sent before.
func EventID(k Kind, period, identity string, start time.Time, route, layer string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{
		idVersion, string(k), period, identity, start.UTC().Format(time.RFC3339), route, layer,
	}, "\x00")))
	return hex.EncodeToString(sum[:16])
}

// Events returns the events of a row of usage in period: a usage event of
// the units charged and an adjustment event of the units given back, each
// only where it is not zero; or, if settled, one settled event of the
// units as settled, unless they are zero; then, either way, an overage
// event of the units past a soft cap, unless they are zero.
func Events(r usage.Row, period string, settled bool) []Event {
	e := Event{Period: period, Start: r.Start.UTC(), Identity: r.Identity, KeyID: r.KeyID, CustomerID: r.CustomerID, Route: r.Route, Layer: r.Layer}
	var out []Event
	add := func(k Kind, units int64) {
		if units == 0 {
			return
		}
		e.Kind, e.Units = k, units
		e.ID = EventID(k, period, r.Identity, r.Start, r.Route, r.Layer)
		out = append(out, e)
	}
	if settled {
		add(Settled, r.Settled())
	} else {
		add(Usage, r.Charged)
		add(Adjustment, -r.GivenBack)
	}
	add(Overage, r.Overage)
	return out
}
