// Package alertstest is a webhook receiver of threshold alerts for tests:
// a real HTTP server on loopback that verifies each delivery's signature
// and counts deliveries by event id.
package alertstest

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/alerts"
)

// Receiver is a webhook on loopback, at URL, that verifies each delivery
// with alerts.Verify and counts the deliveries by event id. It answers the
// first Fail deliveries 503, as a receiver that is down.
type Receiver struct {
	URL    string
	secret string
	mu     sync.Mutex
	fail   int
	tries  int
	byID   map[string]int
	events map[string]alerts.Event
	bad    int
}

// NewReceiver starts a Receiver verifying with secret that fails its first
// fail deliveries; it stops when tb ends.
func NewReceiver(tb testing.TB, secret string, fail int) *Receiver {
	tb.Helper()
	r := &Receiver{secret: secret, fail: fail, byID: map[string]int{}, events: map[string]alerts.Event{}}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	var e alerts.Event
	if err := alerts.Verify(r.secret, req.Header.Get(alerts.SignatureHeader), body, time.Minute); err != nil ||
		json.Unmarshal(body, &e) != nil || e.ID != req.Header.Get(alerts.EventIDHeader) {
		r.bad++
		http.Error(w, "refused", http.StatusBadRequest)
		return
	}
	if r.tries++; r.tries <= r.fail {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	r.byID[e.ID]++
	r.events[e.ID] = e
}

// Deliveries returns the deliveries accepted, by event id, and how many
// were refused because their signature, body or id header was wrong.
func (r *Receiver) Deliveries() (byID map[string]int, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.byID), r.bad
}

// Events returns the events accepted, by id.
func (r *Receiver) Events() map[string]alerts.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.events)
}

// Wait polls until n distinct events were accepted, failing tb after 10 s,
// then waits settle more for a wrong extra delivery to arrive.
func (r *Receiver) Wait(tb testing.TB, n int, settle time.Duration) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if byID, _ := r.Deliveries(); len(byID) >= n {
			break
		}
		if time.Now().After(deadline) {
			byID, bad := r.Deliveries()
			tb.Fatalf("timed out waiting for %d events: got %v (%d refused)", n, byID, bad)
		}
	}
	time.Sleep(settle)
}
