// Package alerts sends threshold alerts: when a charge takes a key's
// period limit (a day, a month) across a percent its plan names, one
// event per identity, limit, period and threshold is claimed in
// PostgreSQL, where every server meets, and posted to a webhook, signed
// as Stripe signs its webhooks, until the receiver answers 2xx.
//
// The claim and the delivery's state are one row of alert_events
// (migrations/00012_alert_events.sql): a claim is an INSERT that a unique
// key makes happen once across every server, and a claimed event stays
// undelivered, and retried, until a delivery succeeds or gives up. An
// event is delivered at least once: a receiver whose 2xx is lost gets it
// again, with the same id, and deduplicates by it.
package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// TypeThreshold is the type of a threshold event.
const TypeThreshold = "quota.threshold"

// Event is a threshold crossed, as the webhook's JSON body carries it.
type Event struct {
	// ID names the event; the same for every delivery of it (see EventID).
	ID   string `json:"id"`
	Type string `json:"type"`
	// Created is when the event was claimed, in Unix seconds.
	Created int64 `json:"created"`
	KeyID   int64 `json:"key_id"`
	// CustomerID is the key's customer, 0 for none.
	CustomerID int64  `json:"customer_id"`
	Identity   string `json:"identity"`
	Plan       string `json:"plan"`
	// Limit is the period limit's name, "month".
	Limit       string    `json:"limit"`
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
	// Threshold is the percent of Max crossed.
	Threshold int `json:"threshold"`
	// Used is the limit's count after the charge that crossed it.
	Used int64 `json:"used"`
	Max  int64 `json:"max"`
}

// EventID is the id of the event of identity's limit crossing threshold
// in the period that starts at periodStart: "evt_" and 32 hex digits of a
// hash of them, the same on every server and at every retry.
func EventID(identity, limit string, periodStart time.Time, threshold int) string {
	h := sha256.New()
	for _, s := range []string{identity, limit, strconv.FormatInt(periodStart.UnixMilli(), 10), strconv.Itoa(threshold)} {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	return "evt_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Crossed returns the thresholds (percents of max, sorted) that a count
// going from before to after crossed: below before, at or above after.
func Crossed(thresholds []int, max, before, after int64) []int {
	var crossed []int
	for _, pct := range thresholds {
		if at := int64(pct); before*100 < at*max && after*100 >= at*max {
			crossed = append(crossed, pct)
		}
	}
	return crossed
}
