package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The public /readyz says ready or not, and nothing else: no dependency's
// name, address or error. The admin handler's /readyz says each.
func TestReadyzDetailsOnlyOnAdmin(t *testing.T) {
	const secret = "dial tcp 10.1.2.3:6379: connect: connection refused"
	failing := func(context.Context) error { return errors.New(secret) }
	ok := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name       string
		checks     []Check
		status     int
		public     string
		adminParts []string
	}{
		{"all ok", []Check{{Name: "redis", Ping: ok}, {Name: "database", Ping: ok}},
			http.StatusOK, `{"ready":true}`, []string{`"redis":"ok"`, `"database":"ok"`}},
		{"optional failing", []Check{{Name: "redis", Ping: failing, Optional: true}, {Name: "database", Ping: ok}},
			http.StatusOK, `{"ready":true}`, []string{secret, `"degraded":["redis"]`}},
		{"required failing", []Check{{Name: "redis", Ping: ok}, {Name: "database", Ping: failing}},
			http.StatusServiceUnavailable, `{"ready":false}`, []string{`"database":"` + secret, `"ready":false`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, with(func(c *Config) { c.Ready = tc.checks }))
			read := func(resp *http.Response) string {
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tc.status {
					t.Errorf("%s: status %d, want %d: %s", resp.Request.URL, resp.StatusCode, tc.status, b)
				}
				return strings.TrimSpace(string(b))
			}
			if got := read(e.get(t, "/readyz")); got != tc.public {
				t.Errorf("public /readyz: %s, want %s", got, tc.public)
			}
			got := read(e.adminGet(t, "/readyz"))
			for _, want := range tc.adminParts {
				if !strings.Contains(got, want) {
					t.Errorf("admin /readyz: %s, want it to hold %s", got, want)
				}
			}
		})
	}
}
