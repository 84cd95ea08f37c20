package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/testenv"
)

// With QuotaMaxWait, a request the quota refuses for less than the wait
// (here a tile, whose charge carries its cache lookup) waits for its turn
// and is served, charged; without it, the same request is a 429 at once.
func TestQuotaMaxWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wait   time.Duration
		status int
	}{
		{"off", 0, http.StatusTooManyRequests},
		{"1.5s", 1500 * time.Millisecond, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withRedis(testenv.RedisURL(t)), with(func(c *Config) { c.QuotaMaxWait = tc.wait }))
			start := time.Now()
			for range 10 { // plan ten: 10 units a second
				if resp := e.get(t, contains, key("ten")...); resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d filling the window", resp.StatusCode)
				}
			}
			resp := e.get(t, "/v1/tiles/places/12/2074/1409.mvt", key("ten")...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != http.StatusOK {
				return
			}
			if since, st := time.Since(start), resp.Header.Get(headerStatus); since < time.Second || st != statusCharged {
				t.Errorf("served %v after the window began to fill, X-Quota-Status %q; want after its 1 s, charged", since, st)
			}
		})
	}
}
