package httpapi

import (
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TileJSON's tiles, and the catalog's TileJSON URLs, are absolute (TileJSON
// 3.0.0 section 3.2; MapLibre GL JS does not resolve relative ones): from
// TILEAPI_PUBLIC_URL, cacheable by shared caches; without it, from the
// request's Host only when it is checked (loopback, or one of
// TILEAPI_PUBLIC_HOSTS), else from the address the connection reached,
// for the client's cache alone and varying by Host. A Host the server has
// not checked never appears in a URL.
func TestTileJSONURLs(t *testing.T) {
	const local = "(local)" // the address the test's connections reach
	for _, tc := range []struct {
		name, publicURL string
		publicHosts     []string
		host, proto     string // Host and X-Forwarded-Proto
		trustProxy      bool   // the test client's 127.0.0.1 is a trusted proxy
		base, cache     string
	}{
		{name: "public URL", publicURL: "https://tiles.example.com", host: "evil.example:80",
			base: "https://tiles.example.com", cache: "public, max-age=300"},
		{name: "localhost", host: "localhost:8080", base: "http://localhost:8080"},
		{name: "LOCALHOST without a port", host: "LOCALHOST", base: "http://LOCALHOST"},
		{name: "127.0.0.0/8", host: "127.0.0.7:9", base: "http://127.0.0.7:9"},
		{name: "IPv6 loopback", host: "[::1]:8080", base: "http://[::1]:8080"},
		{name: "a listed host, any port", publicHosts: []string{"maps.example.org"}, host: "Maps.Example.org:8443",
			base: "http://Maps.Example.org:8443"},
		{name: "a listed host and port", publicHosts: []string{"maps.example.org:443"}, host: "maps.example.org:443",
			base: "http://maps.example.org:443"},
		{name: "a listed IPv6 address", publicHosts: []string{"[2001:DB8::1]"}, host: "[2001:db8:0::1]:8080",
			base: "http://[2001:db8:0::1]:8080"},
		{name: "https from a trusted proxy", publicHosts: []string{"maps.example.org"}, host: "maps.example.org",
			proto: "https", trustProxy: true, base: "https://maps.example.org"},
		{name: "the nearest trusted proxy's proto", publicHosts: []string{"maps.example.org"}, host: "maps.example.org",
			proto: "https, http", trustProxy: true, base: "http://maps.example.org"},
		{name: "https from anyone else", publicHosts: []string{"maps.example.org"}, host: "maps.example.org",
			proto: "https", base: "http://maps.example.org"},
		// Unchecked Hosts: the address the connection reached.
		{name: "an unlisted host", host: "evil.example:80", base: local},
		{name: "a listed host on another port", publicHosts: []string{"maps.example.org:443"}, host: "maps.example.org:8443", base: local},
		{name: "a host that ends like a listed one", publicHosts: []string{"example.org"}, host: "evil-example.org", base: local},
		{name: "a listed host's subdomain", publicHosts: []string{"example.org"}, host: "evil.example.org", base: local},
		{name: "localhost's subdomain", host: "localhost.evil.example", base: local},
		{name: "a loopback address's lookalike", host: "127.0.0.1.evil.example", base: local},
		{name: "https from a trusted proxy, unlisted", host: "evil.example", proto: "https", trustProxy: true, base: local},
		{name: "a Host that is no host", host: "a_b.example", base: local},
		{name: "a port that is no port", host: "localhost:0", base: local},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, with(func(c *Config) {
				c.PublicURL, c.PublicHosts = tc.publicURL, tc.publicHosts
				if tc.trustProxy {
					c.TrustedProxies = []string{"127.0.0.0/8", "::1/128"}
				}
			}))
			base := tc.base
			if base == local {
				base = e.srv.URL // httptest listens on 127.0.0.1:port
			}
			cache := tc.cache
			if cache == "" {
				cache = "private, max-age=300"
			}
			headers := append(key("std"), "Host", tc.host)
			if tc.proto != "" {
				headers = append(headers, "X-Forwarded-Proto", tc.proto)
			}
			for path, want := range map[string]string{
				"/v1/tiles/places.json": base + "/v1/tiles/places/{z}/{x}/{y}.mvt",
				"/v1/tiles":             base + "/v1/tiles/places.json",
			} {
				resp := e.get(t, path, headers...)
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("%s: status %d %s", path, resp.StatusCode, body)
				}
				if got := resp.Header.Get("Cache-Control"); got != cache {
					t.Errorf("%s: Cache-Control %q, want %q", path, got, cache)
				}
				if got := resp.Header.Values("Vary"); slices.Contains(got, "Host") != (tc.publicURL == "") {
					t.Errorf("%s: Vary %q, want Host in it: %v", path, got, tc.publicURL == "")
				}
				urls := tileJSONURLs(t, body)
				if !slices.Contains(urls, want) {
					t.Errorf("%s: URLs %q, want %q among them", path, urls, want)
				}
				for _, u := range urls {
					p, err := url.Parse(strings.NewReplacer("{", "", "}", "").Replace(u))
					if err != nil || !p.IsAbs() || !strings.HasPrefix(u, base+"/v1/tiles/") {
						t.Errorf("%s: URL %q is not absolute under %s: %v", path, u, base, err)
					}
				}
				if strings.Contains(strings.ToLower(string(body)), "evil") {
					t.Errorf("%s: an unchecked Host in the answer: %s", path, body)
				}
			}
		})
	}
}

// tileJSONURLs are the URLs of a TileJSON's tiles or a catalog's layers.
func tileJSONURLs(t *testing.T, body []byte) []string {
	t.Helper()
	var doc struct {
		Tiles  []string
		Layers []struct{ TileJSON string }
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	urls := doc.Tiles
	for _, l := range doc.Layers {
		urls = append(urls, l.TileJSON)
	}
	if len(urls) == 0 {
		t.Fatalf("no URL in %s", body)
	}
	return urls
}

// A TILEAPI_PUBLIC_HOSTS entry that is not a host and optional port is
// refused, naming it: by serve at startup, and by NewServer.
func TestPublicHostsChecked(t *testing.T) {
	for _, h := range []string{"", "https://maps.example.org", "maps.example.org/", "maps.example.org:0", "::1", "[fe80::1%eth0]", "a_b.example", "*.example.org"} {
		if err := CheckPublicHost(h); err == nil || !strings.Contains(err.Error(), "is not a host name or address") {
			t.Errorf("CheckPublicHost(%q) = %v, want a refusal", h, err)
		}
		if _, err := parsePublicHosts([]string{"localhost", h}); err == nil || !strings.HasPrefix(err.Error(), "httpapi: public host: ") {
			t.Errorf("NewServer's check of %q: %v", h, err)
		}
	}
	for _, h := range []string{"maps.example.org", "maps.example.org:8443", "10.0.0.5", "[2001:db8::1]:443"} {
		if err := CheckPublicHost(h); err != nil {
			t.Errorf("CheckPublicHost(%q) = %v", h, err)
		}
	}
}
