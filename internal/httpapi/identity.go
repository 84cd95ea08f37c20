package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/quota"
)

// Every quota identity the service charges is built here.

// DefaultAnonymousIPv6Prefix is the prefix length by which anonymous IPv6
// clients are counted unless Config.AnonymousIPv6Prefix says otherwise:
// a /64, the smallest block a subscriber is given.
const DefaultAnonymousIPv6Prefix = 64

// KeyIdentity is the quota identity of key k: "key:<id>" for a key of no
// customer; for a key of a customer, the key as a member of its
// customer's identity (quota.Member(CustomerIdentity(c), "key:<id>")),
// which takes the customer's hash slot on Redis Cluster, so that one
// script decides a charge of both. Moving a key into or out of a customer
// changes its identity: its own windows and periods start anew. The load
// tool's audit reads the same identity.
func KeyIdentity(k keys.Key) string {
	if k.CustomerID == 0 {
		return ownIdentity(k)
	}
	return quota.Member(CustomerIdentity(k.CustomerID), ownIdentity(k))
}

// ownIdentity is "key:<id>", k's own name.
func ownIdentity(k keys.Key) string { return "key:" + strconv.FormatInt(k.ID, 10) }

// CustomerIdentity is the quota identity of the customer with the given
// id: "customer:<id>", which every charge of its keys is recorded in too.
func CustomerIdentity(id int64) string { return "customer:" + strconv.FormatInt(id, 10) }

// keyGroup is the identity whose hash slot every charge of k is decided
// in: its customer's, or its own.
func keyGroup(k keys.Key) string {
	if k.CustomerID == 0 {
		return ownIdentity(k)
	}
	return CustomerIdentity(k.CustomerID)
}

// tokenIdentity is the identity of the budget of the token jti of key k:
// a member of k's group, charged with the key in one decision.
func tokenIdentity(k keys.Key, jti string) string { return quota.Member(keyGroup(k), "token:"+jti) }

// anonymousIdentity is the quota identity of a request without a key, by
// its client network (see clientNetwork).
func anonymousIdentity(network string) string { return "ip:" + network }

// unknownKeyIdentity is the identity that a client network's unknown API
// keys are charged to.
func unknownKeyIdentity(network string) string { return "unknown-key:" + network }

// checkIdentity checks the settings of cfg that identify clients, and
// fills in their defaults.
func checkIdentity(cfg *Config) error {
	for _, p := range cfg.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			return fmt.Errorf("httpapi: trusted proxy %q: want a CIDR prefix such as 10.0.0.0/8", p)
		}
	}
	if cfg.AnonymousIPv6Prefix == 0 {
		cfg.AnonymousIPv6Prefix = DefaultAnonymousIPv6Prefix
	}
	if cfg.AnonymousIPv6Prefix < 32 || cfg.AnonymousIPv6Prefix > 128 {
		return fmt.Errorf("httpapi: anonymous IPv6 prefix /%d: want 32 to 128", cfg.AnonymousIPv6Prefix)
	}
	return nil
}

// clientIP stores the client's address (chi's GetClientIP) for anonymous
// quotas: from X-Forwarded-For only when the TCP peer is a trusted proxy,
// otherwise the peer itself, so a client cannot pick its own budget by
// spoofing the header. A request from a trusted proxy without
// X-Forwarded-For is the proxy's own (a health check, a job on its host):
// its client is the proxy.
func (s *Server) clientIP() func(http.Handler) http.Handler {
	if len(s.cfg.TrustedProxies) == 0 {
		return middleware.ClientIPFromRemoteAddr
	}
	fromXFF := middleware.ClientIPFromXFF(s.cfg.TrustedProxies...)
	return func(next http.Handler) http.Handler {
		xff, peer := fromXFF(next), middleware.ClientIPFromRemoteAddr(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if forwarded(r.Header) {
				xff.ServeHTTP(w, r)
				return
			}
			peer.ServeHTTP(w, r)
		})
	}
}

// forwarded reports whether h names any address in X-Forwarded-For.
func forwarded(h http.Header) bool {
	for _, v := range h.Values("X-Forwarded-For") {
		if strings.Trim(v, " \t,") != "" {
			return true
		}
	}
	return false
}

// clientNetwork is what the request of ctx's client is counted by (see
// networkOf), by the address clientIP stored.
func (s *Server) clientNetwork(ctx context.Context) (string, bool) {
	return networkOf(middleware.GetClientIPAddr(ctx), s.cfg.AnonymousIPv6Prefix)
}

// networkOf is what one client is counted by: an IPv4 address as it is,
// and an IPv6 address by its prefix of ipv6Bits (a /64, the block a single
// subscriber gets, by default), so that rotating addresses within it buys
// no fresh budget (as go-chi/httprate canonicalises). An IPv4-mapped IPv6
// address is its IPv4 address. It reports false for an invalid address.
func networkOf(ip netip.Addr, ipv6Bits int) (string, bool) {
	if !ip.IsValid() {
		return "", false
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String(), true
	}
	return netip.PrefixFrom(ip, ipv6Bits).Masked().String(), true
}
