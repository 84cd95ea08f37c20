package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// The URLs TileJSON and the catalog name. TileJSON 3.0.0 (section 3.2)
// wants its tiles absolute, and MapLibre GL JS fetches them as written,
// from a Web Worker started from a blob: URL, against which a relative
// URL such as /v1/tiles/... is no URL at all ("Request constructor: not a
// valid URL"): root-relative URLs would leave every map blank. So the
// URLs are absolute, and their host is one the server vouches for, never
// a Host header it has not checked.

// baseURL is the scheme and host of the URLs a response names, and the
// caching its response may have:
//
//   - from Config.PublicURL (TILEAPI_PUBLIC_URL): shared caches may keep it;
//   - else from the request's Host when it is checked (checkedHost: a
//     loopback host, or one of Config.PublicHosts);
//   - else from the address the connection reached on this server (the
//     listener's own address, or the interface's behind a wildcard one),
//     which the client did not write: a page that reached the server
//     directly still draws its map, and a Host such as evil.example
//     never appears in a URL.
//
// Without PublicURL the response is for the client's cache alone and
// varies by Host, which decides whether the Host is used.
func (s *Server) baseURL(r *http.Request) (string, http.Header) {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL, http.Header{"Cache-Control": {"public, max-age=300"}}
	}
	private := http.Header{"Cache-Control": {"private, max-age=300"}, "Vary": {"Host"}}
	if s.checkedHost(r.Host) {
		return s.scheme(r) + "://" + r.Host, private
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return "", private // not on a network listener: root-relative, the only URL left
	}
	ap, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return "", private // a Unix socket, say
	}
	return scheme + "://" + netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()).String(), private
}

// checkedHost reports whether the Host h may name the server in a URL: a
// loopback host (localhost, 127.0.0.0/8, [::1]) with any port, or a host
// of Config.PublicHosts (with its port, if the entry names one).
func (s *Server) checkedHost(h string) bool {
	host, port, ok := splitHost(h)
	if !ok {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return true
	}
	for _, e := range s.publicHosts {
		if strings.EqualFold(host, e.host) && (e.port == "" || e.port == port) {
			return true
		}
	}
	return false
}

// scheme is the scheme a client reached a checked Host with: https over
// TLS, or when a trusted proxy says so in X-Forwarded-Proto (its last
// value: the one the nearest proxy wrote); else http.
func (s *Server) scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	protos := r.Header.Values("X-Forwarded-Proto")
	if len(protos) == 0 || !s.fromTrustedProxy(r) {
		return "http"
	}
	last := protos[len(protos)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	if strings.EqualFold(strings.TrimSpace(last), "https") {
		return "https"
	}
	return "http"
}

// fromTrustedProxy reports whether r's TCP peer is in Config.TrustedProxies.
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	peer := ap.Addr().Unmap()
	for _, p := range s.proxies {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// publicHost is an entry of Config.PublicHosts: a host, and a port or "".
type publicHost struct{ host, port string }

// CheckPublicHost reports whether h can be an entry of Config.PublicHosts
// (TILEAPI_PUBLIC_HOSTS): a host name, an IPv4 address or a bracketed
// IPv6 address, with an optional port.
func CheckPublicHost(h string) error {
	if _, _, ok := splitHost(h); !ok {
		return fmt.Errorf("%q is not a host name or address with an optional port, such as maps.example.com or maps.example.com:8443", h)
	}
	return nil
}

// parsePublicHosts checks the entries of Config.PublicHosts.
func parsePublicHosts(hosts []string) ([]publicHost, error) {
	out := make([]publicHost, 0, len(hosts))
	for _, h := range hosts {
		host, port, ok := splitHost(h)
		if !ok {
			return nil, fmt.Errorf("httpapi: public host: %w", CheckPublicHost(h))
		}
		out = append(out, publicHost{host, port})
	}
	return out, nil
}

// splitHost splits h, a host name, an IPv4 address or a bracketed IPv6
// address with an optional port (1 to 65535, no leading zero), into the
// host (an address in its canonical form, without brackets) and the port:
// nothing a URL could be bent with. ok is false for anything else.
func splitHost(h string) (host, port string, ok bool) {
	host = h
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		host, port = h[:i], h[i+1:]
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", "", false
		}
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		ip, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", "", false
		}
		return ip.String(), port, true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.String(), port, ip.Is4()
	}
	if host == "" || len(host) > 253 {
		return "", "", false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", "", false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return "", "", false
			}
		}
	}
	return host, port, true
}
