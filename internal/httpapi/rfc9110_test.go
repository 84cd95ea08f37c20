package httpapi

import (
	"net/http"
	"slices"
	"testing"
)

// RFC 9110: every 401 says how to authenticate (WWW-Authenticate, section
// 11.6.1), every 405 which methods the resource has (Allow, section
// 15.5.6).
func TestRequiredHeaders(t *testing.T) {
	e := newEnv(t, with(func(c *Config) { c.NoAnonymous = true }))
	for _, tc := range []struct {
		name    string
		resp    *http.Response
		status  int
		header  string
		want    []string
		problem string
	}{
		{"missing key", e.get(t, contains), http.StatusUnauthorized, "WWW-Authenticate",
			[]string{`Bearer realm="tileapi"`, `APIKey realm="tileapi", header="X-API-Key"`}, "missing-key"},
		{"unknown key", e.get(t, contains, "X-API-Key", "no-such-key"), http.StatusUnauthorized, "WWW-Authenticate",
			[]string{`Bearer realm="tileapi"`, `APIKey realm="tileapi", header="X-API-Key"`}, "unknown-key"},
		{"admin token", e.adminGet(t, "/admin/keys"), http.StatusUnauthorized, "WWW-Authenticate",
			[]string{`Bearer realm="tileapi-admin"`}, "admin-token-required"},
		{"POST /v1/tiles", e.do(t, http.MethodPost, "/v1/tiles", nil), http.StatusMethodNotAllowed, "Allow",
			[]string{"GET, HEAD"}, "method-not-allowed"},
		{"DELETE /v1/geofence/contains", e.do(t, http.MethodDelete, contains, nil), http.StatusMethodNotAllowed, "Allow",
			[]string{"GET, HEAD"}, "method-not-allowed"},
		{"PUT /healthz", e.do(t, http.MethodPut, "/healthz", nil), http.StatusMethodNotAllowed, "Allow",
			[]string{"GET, HEAD"}, "method-not-allowed"},
		{"PATCH /admin/keys/1", e.adminDo(t, http.MethodPatch, "/admin/keys/1", nil, "Authorization", "Bearer admin-secret"), http.StatusMethodNotAllowed, "Allow",
			[]string{"GET, HEAD, DELETE"}, "method-not-allowed"},
		{"POST /admin/keys/1/plan", e.adminDo(t, http.MethodPost, "/admin/keys/1/plan", nil, "Authorization", "Bearer admin-secret"), http.StatusMethodNotAllowed, "Allow",
			[]string{"PUT"}, "method-not-allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p problem
			decode(t, tc.resp, tc.status, &p)
			if got := tc.resp.Header.Values(tc.header); !slices.Equal(got, tc.want) {
				t.Errorf("%s: %q, want %q", tc.header, got, tc.want)
			}
			if p.Code != tc.problem {
				t.Errorf("problem %q, want %q", p.Code, tc.problem)
			}
		})
	}
}
