package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A day limit in a plan's time zone: its policy and state in the headers,
// a 429 quota-exhausted once it is spent, with Retry-After until midnight
// in that zone, and /v1/quota showing when it starts again.
func TestDayLimit(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, mode.opts(t)...)
			ny, _ := time.LoadLocation("America/New_York")
			now := time.Now().In(ny)
			midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, ny)
			// w is today's length in New York: 23 or 25 hours where the
			// clocks change.
			today := fmt.Sprintf(`"day";q=5;w=%d`, int64(midnight.Sub(time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, ny)).Seconds()))
			for i := range 5 {
				resp := e.get(t, contains, key("daily")...)
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
				if i == 0 && !strings.Contains(resp.Header.Get("RateLimit-Policy"), today) {
					t.Errorf("RateLimit-Policy %q, want %s", resp.Header.Get("RateLimit-Policy"), today)
				}
			}
			resp := e.get(t, contains, key("daily")...)
			var p problem
			decode(t, resp, http.StatusTooManyRequests, &p)
			ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
			want := int64(time.Until(midnight).Seconds())
			if p.Code != "quota-exhausted" || p.Limit != "day" || ra < want-5 || ra > want+5 {
				t.Errorf("sixth request: %+v, Retry-After %d, want quota-exhausted until New York's midnight (%ds)", p, ra, want)
			}
			if at, err := time.Parse(time.RFC3339, p.ResetsAt); err != nil || at.Sub(midnight).Abs() > 5*time.Second {
				t.Errorf("resets_at %q, want %s", p.ResetsAt, midnight.UTC())
			}
			var u usage
			decode(t, e.get(t, "/v1/quota", key("daily")...), http.StatusOK, &u)
			if l := u.Limits[1]; l.Period != "day" || l.Used != 5 || l.ResetsAt == "" {
				t.Errorf("/v1/quota: %+v", l)
			}
		})
	}
}
