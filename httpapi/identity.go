package httpapi

import (
	"net/netip"
	"strconv"
)

// Every quota identity the service charges is built here.

// KeyIdentity is the quota identity of the API key with the given id. The
// load tool's audit reads the same identity.
func KeyIdentity(id int64) string { return "key:" + strconv.FormatInt(id, 10) }

// anonymousIdentity is the quota identity of a request without a key, by
// its client network (see clientNetwork).
func anonymousIdentity(network string) string { return "ip:" + network }

// unknownKeyIdentity is the identity that a client network's unknown API
// keys are charged to.
func unknownKeyIdentity(network string) string { return "unknown-key:" + network }

// clientNetwork is what one client is counted by: an IPv4 address as it
// is, and an IPv6 address by its /64, the block a single subscriber gets,
// so that rotating addresses within it buys no fresh budget (as
// go-chi/httprate canonicalises). An IPv4-mapped IPv6 address is its IPv4
// address. It reports false for an empty or malformed address.
func clientNetwork(addr string) (string, bool) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return "", false
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String(), true
	}
	return netip.PrefixFrom(ip, 64).Masked().String(), true
}
