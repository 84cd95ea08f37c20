package httpapi

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestNetworkOf(t *testing.T) {
	for _, tc := range []struct {
		addr string
		bits int
		want string
		ok   bool
	}{
		{"198.51.100.7", 64, "198.51.100.7", true},
		{"198.51.100.7", 32, "198.51.100.7", true}, // IPv4 is never grouped
		{"::ffff:198.51.100.7", 64, "198.51.100.7", true},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64", true},
		{"2001:db8:1:2:ffff::1", 64, "2001:db8:1:2::/64", true},
		{"2001:db8:1:3::1", 64, "2001:db8:1:3::/64", true},
		{"2001:db8:1:3::1", 56, "2001:db8:1::/56", true},
		{"2001:db8:1:ff::1", 56, "2001:db8:1::/56", true},
		{"2001:db8:1:100::1", 56, "2001:db8:1:100::/56", true},
		{"2001:db8:1:3::1", 128, "2001:db8:1:3::1/128", true},
		{"fe80::1%eth0", 64, "fe80::/64", true},
		{"", 64, "", false},
	} {
		var ip netip.Addr
		if tc.addr != "" {
			ip = netip.MustParseAddr(tc.addr)
		}
		got, ok := networkOf(ip, tc.bits)
		if got != tc.want || ok != tc.ok {
			t.Errorf("networkOf(%q, %d) = %q, %v; want %q, %v", tc.addr, tc.bits, got, ok, tc.want, tc.ok)
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

// The anonymous IPv6 prefix is the server's to choose: two addresses of
// one /56, in different /64s, are one anonymous client under a /56 and two
// under the default /64.
func TestAnonymousIPv6Prefix(t *testing.T) {
	const budget = 30                                              // the anonymous burst limit
	const first, second = "2001:db8:1:200::1", "2001:db8:1:2ff::1" // in 2001:db8:1:200::/56
	for _, tc := range []struct {
		prefix int
		second int // the status of the second address once the first spent the budget
	}{
		{0, http.StatusOK}, // the default, /64
		{64, http.StatusOK},
		{56, http.StatusTooManyRequests},
	} {
		t.Run("/"+itoa(int64(tc.prefix)), func(t *testing.T) {
			e := newEnv(t, with(func(c *Config) {
				c.TrustedProxies = []string{"127.0.0.1/32"}
				c.AnonymousIPv6Prefix = tc.prefix
			}))
			for i := range budget {
				if resp := e.get(t, contains, "X-Forwarded-For", first); resp.StatusCode != 200 {
					t.Fatalf("request %d from %s: status %d", i, first, resp.StatusCode)
				}
			}
			if resp := e.get(t, contains, "X-Forwarded-For", second); resp.StatusCode != tc.second {
				t.Errorf("%s after %s spent the budget: status %d, want %d", second, first, resp.StatusCode, tc.second)
			}
		})
	}
}

// A request from a trusted proxy without X-Forwarded-For (a health check,
// a job on the proxy's host) is the proxy's own: served and charged to the
// proxy's address, apart from the clients it forwards. An X-Forwarded-For
// that does not parse still names no client.
func TestTrustedProxyOwnRequest(t *testing.T) {
	e := newEnv(t, with(func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32"} }))
	const budget = 30 // the anonymous burst limit
	for i := range budget {
		if resp := e.get(t, contains); resp.StatusCode != 200 {
			t.Fatalf("the proxy's own request %d: status %d, want 200", i, resp.StatusCode)
		}
	}
	for _, xff := range []string{"", " , "} {
		h := []string{}
		if xff != "" {
			h = []string{"X-Forwarded-For", xff}
		}
		if resp := e.get(t, contains, h...); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("X-Forwarded-For %q once the proxy spent its budget: status %d, want 429", xff, resp.StatusCode)
		}
	}
	if resp := e.get(t, contains, "X-Forwarded-For", "198.51.100.1"); resp.StatusCode != 200 {
		t.Errorf("a client the proxy forwards: status %d, want 200 on a budget of its own", resp.StatusCode)
	}
	var p problem
	decode(t, e.get(t, contains, "X-Forwarded-For", "not-an-address"), http.StatusBadRequest, &p)
	if p.Code != "no-client-address" {
		t.Errorf("an X-Forwarded-For that does not parse: %+v, want no-client-address", p)
	}
}

// NewServer refuses client settings it cannot use (checkIdentity), with an
// error, not chi's panic.
func TestCheckIdentity(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"spaced proxy", func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32", " ::1/128"} }, `trusted proxy " ::1/128"`},
		{"proxy address", func(c *Config) { c.TrustedProxies = []string{"10.0.0.1"} }, `trusted proxy "10.0.0.1"`},
		{"short prefix", func(c *Config) { c.AnonymousIPv6Prefix = 16 }, "/16"},
		{"long prefix", func(c *Config) { c.AnonymousIPv6Prefix = 129 }, "/129"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{AnonymousIPv6Prefix: DefaultAnonymousIPv6Prefix}
			tc.set(&cfg)
			err := checkIdentity(&cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}
