// Package keys issues and looks up tileapi's API keys.
//
// A key's secret ("tk_sec_3f9a2c1b_<43 base64url characters><6 base62
// checksum characters>", or tk_pub_ for a publishable key) is shown once,
// when the key is created, and kept only as its SHA-256 (Hash) beside a
// short visible prefix (PrefixOf) that is safe to log. Postgres keeps keys
// in PostgreSQL, Memory in process; both have the same methods. An Index
// holds every key in process and keeps itself fresh from the store's
// changes, so a request costs no database round trip.
//
// A key may belong to a Customer, whose plan every request of the key
// must fit too; the Index holds customers beside keys.
//
// Plan names are not validated here: the caller checks them against its
// plans.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
	"unicode/utf8"
)

// Key is an API key's record; it never holds the secret.
type Key struct {
	ID int64
	// Prefix is the visible start of the secret, e.g. "tk_3f9a2c1b", safe
	// to log and to show.
	Prefix    string
	Name      string
	Plan      string
	CreatedAt time.Time
	// RevokedAt is when the key was revoked, zero while it is active.
	RevokedAt time.Time
	// UpdatedAt is when the key was last changed (created, revoked,
	// rerolled, moved to another plan or customer, given overrides,
	// restrictions or an expiry), by the store's clock.
	UpdatedAt time.Time
	// Overrides is the JSON of the key's own changes to its plan
	// (plans.Overrides), nil for none. This package stores it as it is.
	Overrides []byte
	// Restrictions is the JSON of where and for what the key works
	// (access.Restrictions), nil for anywhere and anything. This package
	// stores it as it is.
	Restrictions []byte
	// ExpiresAt is when the key stops working, zero for never.
	ExpiresAt time.Time
	// PreviousValidUntil is, for a key that has been rerolled, when the
	// secret it had before the last reroll stops working; zero for a key
	// never rerolled.
	PreviousValidUntil time.Time
	// CustomerID is the id of the customer the key belongs to, 0 for
	// none.
	CustomerID int64
}

// Kind is the kind of the key: publishable or secret, as its prefix says.
func (k Key) Kind() Kind { return KindOf(k.Prefix) }

// Expired reports whether the key has expired at t.
func (k Key) Expired(t time.Time) bool { return !k.ExpiresAt.IsZero() && !t.Before(k.ExpiresAt) }

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

var (
	// ErrUnknown means no key has the presented secret (HTTP 401).
	ErrUnknown = errors.New("keys: unknown key")
	// ErrRevoked means the presented key has been revoked (HTTP 403).
	ErrRevoked = errors.New("keys: revoked key")
	// ErrExpired means the presented key is past its ExpiresAt (HTTP
	// 401); the key is returned with it.
	ErrExpired = errors.New("keys: expired key")
	// ErrRotated means the presented secret is the one a key had before
	// its last reroll, and its overlap is over (HTTP 401); the key is
	// returned with it.
	ErrRotated = errors.New("keys: rotated key")
	// ErrNotFound means no key has the id an admin operation names (HTTP
	// 404).
	ErrNotFound = errors.New("keys: key not found")
	// ErrCustomerNotFound means no customer has the id an operation names
	// (HTTP 404 for the customer itself, 400 for a key given to it).
	ErrCustomerNotFound = errors.New("keys: customer not found")
)

// Kind says where a key belongs: a publishable key in web pages, a secret
// key on servers only.
type Kind string

// The kinds of key.
const (
	// Publishable keys ("tk_pub_...") are meant to be seen: in a web page,
	// restricted to its origins.
	Publishable Kind = "publishable"
	// Secret keys ("tk_sec_...") belong on servers; a browser presenting
	// one is refused. Keys of the old form ("tk_<8 hex>_...") and
	// hand-picked ones (demo keys) count as secret.
	Secret Kind = "secret"
)

// ParseKind returns the kind named s: "publishable" or "secret".
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Publishable, Secret:
		return k, nil
	}
	return "", fmt.Errorf("keys: kind %q is neither %q nor %q", s, Publishable, Secret)
}

// The form of a generated secret: "tk_", "pub_" or "sec_" (the kind),
// idBytes random bytes in hex (the visible prefix ends there), "_",
// secretBytes random bytes in unpadded base64url, then the checksum:
// CRC-32 (IEEE) of all that precedes it, in base62, zero-padded to
// checksumLen characters. Scanners find secrets with Pattern.
const (
	scheme      = "tk_"
	idBytes     = 4
	secretBytes = 32
	checksumLen = 6
	kindLen     = len("sec_")
	// legacyPrefixLen is the prefix of the old form, "tk_3f9a2c1b".
	legacyPrefixLen = len(scheme) + 2*idBytes
	// prefixLen is the prefix of the current form, "tk_sec_3f9a2c1b".
	prefixLen = len(scheme) + kindLen + 2*idBytes
	bodyLen   = (secretBytes*8 + 5) / 6 // 43 base64url characters
	// secretLen is the length of a secret of the current form: 65.
	secretLen = prefixLen + 1 + bodyLen + checksumLen
)

// Pattern is the regular expression a secret scanner can use to find
// tileapi secrets; Plausible then tells a real one from noise by its
// checksum.
const Pattern = `tk_(pub|sec)_[0-9a-f]{8}_[A-Za-z0-9_-]{43}[0-9A-Za-z]{6}`

// base62 is the alphabet of the checksum.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// kindMark is the part of a secret after "tk_" that says its kind.
func kindMark(k Kind) string {
	if k == Publishable {
		return "pub_"
	}
	return "sec_"
}

// Generate returns a new random secret of kind k (Secret for an unknown
// one): "tk_sec_<8 hex>_<43 base64url><6 base62>". 4 random bytes make
// its visible prefix, 32 more (256 bits) no prefix reveals, and a
// checksum of all that closes it.
func Generate(k Kind) (string, error) {
	var b [idBytes + secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("keys: generate: %w", err)
	}
	s := scheme + kindMark(k) + hex.EncodeToString(b[:idBytes]) + "_" + base64.RawURLEncoding.EncodeToString(b[idBytes:])
	return s + checksum(s), nil
}

// checksum is the CRC-32 (IEEE) of s in base62, zero-padded to
// checksumLen characters.
func checksum(s string) string {
	n := crc32.ChecksumIEEE([]byte(s))
	var out [checksumLen]byte
	for i := checksumLen - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return string(out[:])
}

// declared reports the kind a secret of the current form says it is,
// from its first characters alone; ok is false for any other secret.
func declared(secret string) (Kind, bool) {
	if len(secret) < len(scheme)+kindLen || secret[:len(scheme)] != scheme {
		return "", false
	}
	switch secret[len(scheme) : len(scheme)+kindLen] {
	case "pub_":
		return Publishable, true
	case "sec_":
		return Secret, true
	}
	return "", false
}

// KindOf returns the kind of a secret, or of a key's prefix: Publishable
// for "tk_pub_...", Secret for anything else ("tk_sec_...", the old
// "tk_<8 hex>_..." form and hand-picked secrets).
func KindOf(secret string) Kind {
	if k, ok := declared(secret); ok {
		return k
	}
	return Secret
}

// Declares reports whether secret is of the current form's kind k by its
// mark ("tk_sec_" for Secret), whatever the rest of it: a secret of the
// old form or a hand-picked one declares no kind.
func Declares(secret string, k Kind) bool {
	d, ok := declared(secret)
	return ok && d == k
}

// Plausible reports whether secret could be a key: false for a secret
// that starts as a current one ("tk_pub_", "tk_sec_") but is not of
// that form or whose checksum is wrong, which no key has, so it needs no
// lookup; true for anything else (secrets of the old form and hand-picked
// ones carry no checksum).
func Plausible(secret string) bool {
	if _, ok := declared(secret); !ok {
		return true
	}
	if len(secret) != secretLen || !generated(secret) {
		return false
	}
	for _, c := range []byte(secret[prefixLen+1 : secretLen-checksumLen]) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return secret[secretLen-checksumLen:] == checksum(secret[:secretLen-checksumLen])
}

// Hash returns the stored form of a secret: its SHA-256. A generated secret
// carries 256 bits of entropy beyond its visible prefix, so no guess can
// find it from the hash and a slow password KDF (bcrypt, argon2) would only
// cost every request time; hand-picked secrets such as demo keys are
// demonstration values, not protected ones.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// PrefixOf returns the visible prefix of a secret: "tk_sec_3f9a2c1b" for a
// generated one, "tk_3f9a2c1b" for one of the old form. For a secret of
// another form (a demo key such as "demo-free") it returns a short
// stand-in, at most its first 4 characters and never more than half of
// it, followed by "…": never the whole secret.
func PrefixOf(secret string) string {
	if generated(secret) {
		return secret[:prefixLen]
	}
	if legacy(secret) {
		return secret[:legacyPrefixLen]
	}
	n := min(4, utf8.RuneCountInString(secret)/2)
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(secret[i:])
		i += size
	}
	return secret[:i] + "…"
}

// generated reports whether secret starts as Generate makes them:
// "tk_pub_" or "tk_sec_", 8 lowercase hex digits, "_", and more.
func generated(secret string) bool {
	_, ok := declared(secret)
	return ok && len(secret) > prefixLen+1 && secret[prefixLen] == '_' && lowerHex(secret[len(scheme)+kindLen:prefixLen])
}

// legacy reports whether secret starts as Generate made them before
// secrets said their kind: "tk_", 8 lowercase hex digits, "_", and more.
func legacy(secret string) bool {
	return len(secret) > legacyPrefixLen+1 && secret[:len(scheme)] == scheme && secret[legacyPrefixLen] == '_' && lowerHex(secret[len(scheme):legacyPrefixLen])
}

func lowerHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
