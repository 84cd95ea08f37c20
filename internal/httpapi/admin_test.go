package httpapi

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The admin API is served by the admin handler only; the public handler
// answers /admin/ with a 404 problem, even with the right token, unless
// AdminOnPublic asks for it there too. The public API is not on the admin
// handler.
func TestAdminOnItsOwnHandler(t *testing.T) {
	admin := []string{"Authorization", "Bearer admin-secret"}
	e := newEnv(t)
	var p problem
	for _, path := range []string{"/admin/keys", "/admin/keys/1", "/admin/keys/1/usage"} {
		resp := e.get(t, path, admin...)
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("public %s: Content-Type %q", path, ct)
		}
		decode(t, resp, http.StatusNotFound, &p)
		if p.Code != "not-found" {
			t.Errorf("public %s: %+v, want not-found", path, p)
		}
	}
	decode(t, e.adminGet(t, "/admin/keys", admin...), http.StatusOK, nil)
	decode(t, e.adminGet(t, contains, key("five")...), http.StatusNotFound, &p)

	both := newEnv(t, with(func(c *Config) { c.AdminOnPublic = true }))
	decode(t, both.get(t, "/admin/keys", admin...), http.StatusOK, nil)
	decode(t, both.adminGet(t, "/admin/keys", admin...), http.StatusOK, nil)
}

// The token is compared whole: a prefix of it, or it with more after, is
// refused.
func TestAdminTokenComparedWhole(t *testing.T) {
	e := newEnv(t)
	for _, token := range []string{"", "a", "admin-secre", "admin-secretadmin-secret", "ADMIN-SECRET"} {
		if resp := e.adminGet(t, "/admin/keys", "Authorization", "Bearer "+token); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", token, resp.StatusCode)
		}
	}
}

// The comparison is given two SHA-256 digests, never the tokens: inputs
// of one length whatever the length of the token presented, so its time
// cannot tell a guesser the admin token's length. Only the token itself
// matches.
func TestAdminTokenComparedAsDigests(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	g, err := newAdminGuard(token)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(token))
	for _, tc := range []struct {
		presented string
		match     bool
	}{
		{token, true},
		{token[:len(token)-1], false},       // a prefix
		{token + "0", false},                // one byte appended
		{"", false},                         // nothing
		{strings.Repeat(token, 64), false},  // far longer
		{token[:len(token)-1] + "e", false}, // one byte changed
	} {
		presented, stored := g.compared(tc.presented)
		if got := sha256.Sum256([]byte(tc.presented)); !bytes.Equal(presented, got[:]) || !bytes.Equal(stored, want[:]) {
			t.Errorf("token of %d bytes: compared %x with %x, want its digest with the admin token's", len(tc.presented), presented, stored)
		}
		if len(presented) != sha256.Size || len(stored) != sha256.Size {
			t.Errorf("token of %d bytes: compared %d bytes with %d, want %d and %d", len(tc.presented), len(presented), len(stored), sha256.Size, sha256.Size)
		}
		if g.matches(tc.presented) != tc.match {
			t.Errorf("token %q: matches %v, want %v", tc.presented, !tc.match, tc.match)
		}
	}
}

// A flood of wrong tokens from one client address is answered 429 after
// adminFailures of them, with a Retry-After, even once the right token
// comes from that address; the right token from another address still
// works, and requests with the right token are not counted as failures.
// The address is the one the quota uses: X-Forwarded-For from a trusted
// proxy.
func TestAdminFailuresThrottled(t *testing.T) {
	e := newEnv(t, with(func(c *Config) { c.TrustedProxies = []string{"127.0.0.0/8", "::1/128"} }))
	from := func(addr string) []string { return []string{"X-Forwarded-For", addr} }
	bearer := func(token, addr string) []string {
		return append([]string{"Authorization", "Bearer " + token}, from(addr)...)
	}

	// The operator's requests with the right token are never failures.
	for range 3 * adminFailures {
		decode(t, e.adminGet(t, "/admin/keys", bearer("admin-secret", "198.51.100.2")...), http.StatusOK, nil)
	}

	// 600 guesses from one address, 8 at a time.
	const attempts, workers = 600, 8
	type answer struct {
		status     int
		retryAfter string
	}
	answers := make(chan answer, attempts)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < attempts; i += workers {
				req, _ := http.NewRequest(http.MethodGet, e.admin.URL+"/admin/keys", nil)
				req.Header.Set("Authorization", "Bearer guess-"+strconv.Itoa(i))
				req.Header.Set("X-Forwarded-For", "203.0.113.7")
				resp, err := e.admin.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After")}
			}
		})
	}
	wg.Wait()
	close(answers)
	count := map[int]int{}
	for a := range answers {
		count[a.status]++
		if a.status != http.StatusTooManyRequests {
			continue
		}
		if ra, err := strconv.Atoi(a.retryAfter); err != nil || ra < 1 || ra > 60 {
			t.Errorf("429 with Retry-After %q, want 1 to 60 seconds", a.retryAfter)
		}
	}
	if count[http.StatusUnauthorized] != adminFailures || count[http.StatusTooManyRequests] != attempts-adminFailures {
		t.Errorf("%d wrong tokens from one address: %v; want %d answered 401 and the rest 429", attempts, count, adminFailures)
	}

	var p problem
	decode(t, e.adminGet(t, "/admin/keys", bearer("admin-secret", "203.0.113.7")...), http.StatusTooManyRequests, &p)
	if p.Code != "too-many-admin-failures" {
		t.Errorf("the throttled address with the right token: %+v", p)
	}
	decode(t, e.adminGet(t, "/admin/keys", bearer("admin-secret", "198.51.100.2")...), http.StatusOK, nil)
	// Another address of the same /64 is the same client.
	decode(t, e.adminGet(t, "/admin/keys", bearer("guess", "2001:db8::1")...), http.StatusUnauthorized, nil)
	for range adminFailures - 1 {
		e.adminGet(t, "/admin/keys", bearer("guess", "2001:db8::2")...)
	}
	decode(t, e.adminGet(t, "/admin/keys", bearer("admin-secret", "2001:db8::3")...), http.StatusTooManyRequests, nil)
}
