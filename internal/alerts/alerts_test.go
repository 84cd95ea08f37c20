package alerts_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/alerts"
	"github.com/tileapi/tileapi/internal/alerts/alertstest"
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
		if got := alerts.Crossed([]int{50, 80, 100}, 100, tc.before, tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("Crossed(%d -> %d) = %v, want %v", tc.before, tc.after, got, tc.want)
		}
	}
	// Percents of a max that is not a multiple of 100: 80% of 7 is 5.6,
	// reached at 6.
	if got := alerts.Crossed([]int{80}, 7, 5, 6); !slices.Equal(got, []int{80}) {
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
		{"signed", alerts.Sign(secret, now, body), body, nil},
		{"two signatures, one good", alerts.Sign(secret[1:]+"x", now, body) + ",v1=" + strings.Split(alerts.Sign(secret, now, body), "v1=")[1], body, nil},
		{"other body", alerts.Sign(secret, now, body), []byte(`{"id":"evt_2"}`), alerts.ErrSignature},
		{"other secret", alerts.Sign(strings.ToUpper(secret), now, body), body, alerts.ErrSignature},
		{"old", alerts.Sign(secret, now.Add(-6*time.Minute), body), body, alerts.ErrTimestamp},
		{"future", alerts.Sign(secret, now.Add(6*time.Minute), body), body, alerts.ErrTimestamp},
		{"no signature", "t=" + strings.Split(strings.TrimPrefix(alerts.Sign(secret, now, body), "t="), ",")[0], body, alerts.ErrNoSignature},
		{"empty", "", body, alerts.ErrNoSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := alerts.Verify(secret, tc.header, tc.body, 5*time.Minute); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// run runs o until the test ends.
func run(t *testing.T, o *alerts.Outbox) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func event(identity string, threshold int) alerts.Event {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return alerts.Event{KeyID: 42, Identity: identity, Plan: "free", Limit: "month", PeriodStart: start,
		PeriodEnd: start.AddDate(0, 1, 0), Threshold: threshold, Used: 80, Max: 100}
}

// A receiver that fails its first tries still gets each event, at least
// once and here exactly once, with one id per claim; a second claim of the
// same threshold and period, on any Outbox, claims nothing; the rows keep
// the attempts.
func TestDeliveredAtLeastOnce(t *testing.T) {
	pool := spatialtest.Migrated(t)
	rcv := alertstest.NewReceiver(t, secret, 3)
	opt := alerts.Options{URL: rcv.URL, Secret: secret, RetryBase: 20 * time.Millisecond, Poll: 20 * time.Millisecond}
	a, err := alerts.New(pool, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := alerts.New(pool, opt)
	run(t, a)
	run(t, b)
	ctx := context.Background()
	for i, o := range []*alerts.Outbox{a, b, a} {
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
	rcv.Wait(t, 2, 200*time.Millisecond)
	byID, bad := rcv.Deliveries()
	if bad != 0 {
		t.Errorf("%d deliveries failed verification", bad)
	}
	for id, n := range byID {
		if n != 1 {
			t.Errorf("event %s delivered %d times, want 1", id, n)
		}
	}
	want := alerts.EventID("key:42", "month", event("", 0).PeriodStart, 80)
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
