package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

// TestMain stops the servers the tests started for the whole binary.
func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

const secret = "0123456789abcdef0123456789abcdef"

func TestCrossed(t *testing.T) {
	for _, tc := range []struct {
		before, after int64
		want          []int
	}{
		{0, 49, nil},
		{49, 50, []int{50}},
		{50, 51, nil}, // at 50 already: crossed before
		{10, 100, []int{50, 80, 100}},
		{79, 79, nil},
		{99, 130, []int{100}},
	} {
		if got := Crossed([]int{50, 80, 100}, 100, tc.before, tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("Crossed(%d -> %d) = %v, want %v", tc.before, tc.after, got, tc.want)
		}
	}
	// Percents of a max that is not a multiple of 100: 80% of 7 is 5.6,
	// reached at 6.
	if got := Crossed([]int{80}, 7, 5, 6); !slices.Equal(got, []int{80}) {
		t.Errorf("80%% of 7 from 5 to 6: %v", got)
	}
}

// Verify takes what Sign makes, and refuses another body, another secret,
// a header without a signature, and a timestamp outside the tolerance.
func TestVerify(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	now := time.Now()
	for _, tc := range []struct {
		name, header string
		body         []byte
		want         error
	}{
		{"signed", Sign(secret, now, body), body, nil},
		{"two signatures, one good", Sign(secret[1:]+"x", now, body) + ",v1=" + strings.Split(Sign(secret, now, body), "v1=")[1], body, nil},
		{"other body", Sign(secret, now, body), []byte(`{"id":"evt_2"}`), ErrSignature},
		{"other secret", Sign(strings.ToUpper(secret), now, body), body, ErrSignature},
		{"old", Sign(secret, now.Add(-6*time.Minute), body), body, ErrTimestamp},
		{"future", Sign(secret, now.Add(6*time.Minute), body), body, ErrTimestamp},
		{"no signature", "t=" + strings.Split(strings.TrimPrefix(Sign(secret, now, body), "t="), ",")[0], body, ErrNoSignature},
		{"empty", "", body, ErrNoSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(secret, tc.header, tc.body, 5*time.Minute); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// receiver is a webhook on loopback that verifies each delivery's
// signature and counts the deliveries by event id, failing the first fail
// of them with a 503.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	fail   int
	tries  int
	byID   map[string]int
	events map[string]Event
	bad    int // deliveries whose signature did not verify
}

// newReceiver is the test's webhook; see receiver.
func newReceiver(t *testing.T, fail int) *receiver {
	t.Helper()
	r := &receiver{fail: fail, byID: map[string]int{}, events: map[string]Event{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := Verify(secret, req.Header.Get(SignatureHeader), body, time.Minute); err != nil {
			r.bad++
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.tries++; r.tries <= r.fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var e Event
		if err := json.Unmarshal(body, &e); err != nil || e.ID != req.Header.Get(EventIDHeader) {
			r.bad++
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.byID[e.ID]++
		r.events[e.ID] = e
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.byID), r.bad
}

// run runs o until the test ends.
func run(t *testing.T, o *Outbox) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func event(identity string, threshold int) Event {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return Event{KeyID: 42, Identity: identity, Plan: "free", Limit: "month", PeriodStart: start,
		PeriodEnd: start.AddDate(0, 1, 0), Threshold: threshold, Used: 80, Max: 100}
}

// A receiver that fails its first tries still gets each event, at least
// once and here exactly once, with one id per claim; a second claim of the
// same threshold and period, on any Outbox, claims nothing; the rows keep
// the attempts.
func TestDeliveredAtLeastOnce(t *testing.T) {
	pool := spatialtest.Migrated(t)
	rcv := newReceiver(t, 3)
	opt := Options{URL: rcv.URL, Secret: secret, RetryBase: 20 * time.Millisecond, Poll: 20 * time.Millisecond}
	a, err := New(pool, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(pool, opt)
	run(t, a)
	run(t, b)
	ctx := context.Background()
	for i, o := range []*Outbox{a, b, a} {
		claimed, err := o.Claim(ctx, event("key:42", 80))
		if err != nil {
			t.Fatal(err)
		}
		if claimed != (i == 0) {
			t.Errorf("claim %d claimed: %v, want only the first to", i, claimed)
		}
	}
	if _, err := b.Claim(ctx, event("key:42", 100)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two events delivered", func() bool { byID, _ := rcv.counts(); return len(byID) == 2 })
	time.Sleep(200 * time.Millisecond) // room for a wrong second delivery
	byID, bad := rcv.counts()
	if bad != 0 {
		t.Errorf("%d deliveries failed verification", bad)
	}
	for id, n := range byID {
		if n != 1 {
			t.Errorf("event %s delivered %d times, want 1", id, n)
		}
	}
	want := EventID("key:42", "month", event("", 0).PeriodStart, 80)
	if _, ok := byID[want]; !ok {
		t.Errorf("delivered %v, want %s among them", byID, want)
	}
	var rows, attempts int
	if err := pool.QueryRow(ctx, `SELECT count(*), sum(attempts) FROM alert_events WHERE delivered_at IS NOT NULL`).Scan(&rows, &attempts); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || attempts != 2+3 {
		t.Errorf("%d rows delivered after %d attempts, want 2 after 5 (3 refused)", rows, attempts)
	}
}
