package httpapi

import (
	"net/http"
	"testing"
)

func TestClientNetwork(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
		ok         bool
	}{
		{"198.51.100.7", "198.51.100.7", true},
		{"::ffff:198.51.100.7", "198.51.100.7", true},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", true},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64", true},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64", true},
		{"fe80::1%eth0", "fe80::/64", true},
		{"", "", false},
		{"not-an-address", "", false},
		{"198.51.100.7:443", "", false},
	} {
		got, ok := clientNetwork(tc.addr)
		if got != tc.want || ok != tc.ok {
			t.Errorf("clientNetwork(%q) = %q, %v; want %q, %v", tc.addr, got, ok, tc.want, tc.ok)
		}
	}
}

// Anonymous clients in one IPv6 /64 share one budget: rotating addresses
// within it buys none.
func TestAnonymousIPv6SharesItsSlash64(t *testing.T) {
	e := newEnv(t, with(func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32"} }))
	const budget = 30 // the anonymous burst limit
	for i := range budget {
		addr := "2001:db8:1:2::" + itoa(int64(i+1))
		if resp := e.get(t, contains, "X-Forwarded-For", addr); resp.StatusCode != 200 {
			t.Fatalf("request %d from %s: status %d", i, addr, resp.StatusCode)
		}
	}
	if resp := e.get(t, contains, "X-Forwarded-For", "2001:db8:1:2:ffff::9"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a new address in the same /64: status %d, want 429", resp.StatusCode)
	}
	if resp := e.get(t, contains, "X-Forwarded-For", "2001:db8:1:3::1"); resp.StatusCode != 200 {
		t.Errorf("another /64: status %d, want 200", resp.StatusCode)
	}
}
