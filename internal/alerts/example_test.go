package alerts_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tileapi/tileapi/internal/alerts"
)

// A receiver verifies each delivery's signature against the raw body
// before it trusts it, then deduplicates by the event's id: a delivery may
// come more than once.
func ExampleVerify() {
	const secret = "whsec-0123456789abcdef0123456789ab" // TILEAPI_ALERTS_WEBHOOK_SECRET
	seen := map[string]bool{}
	webhook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		if err := alerts.Verify(secret, r.Header.Get(alerts.SignatureHeader), body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		id := r.Header.Get(alerts.EventIDHeader)
		if !seen[id] { // in production, a unique key in the receiver's database
			seen[id] = true
			fmt.Println("new event", id)
		}
		w.WriteHeader(http.StatusNoContent) // any 2xx stops the retries
	})

	body := `{"id":"evt_1","type":"quota.threshold"}`
	for _, sig := range []string{alerts.Sign(secret, time.Now(), []byte(body)), "t=1,v1=00"} {
		r := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(body))
		r.Header.Set(alerts.SignatureHeader, sig)
		r.Header.Set(alerts.EventIDHeader, "evt_1")
		w := httptest.NewRecorder()
		webhook.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// new event evt_1
	// 204
	// 400
}
