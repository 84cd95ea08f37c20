// Package keys issues and looks up tileapi's API keys.
//
// A key's secret ("tk_3f9a2c1b_<43 base64url characters>") is shown once,
// when the key is created, and kept only as its SHA-256 (Hash) beside a
// short visible prefix (PrefixOf) that is safe to log. Postgres keeps keys
// in PostgreSQL, Memory in process; both have the same methods. An Index
// holds every key in process and keeps itself fresh from the store's
// changes, so a request costs no database round trip.
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
	// UpdatedAt is when the key was last created, revoked, moved to
	// another plan or given overrides, by the store's clock.
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
}

// Expired reports whether the key has expired at t.
func (k Key) Expired(t time.Time) bool { return !k.ExpiresAt.IsZero() && !t.Before(k.ExpiresAt) }

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

var (
	// ErrUnknown means no key has the presented secret (HTTP 401).
	ErrUnknown = errors.New("keys: unknown key")
	// ErrRevoked means the presented key has been revoked (HTTP 403).
	ErrRevoked = errors.New("keys: revoked key")
	// ErrNotFound means no key has the id an admin operation names (HTTP
	// 404).
	ErrNotFound = errors.New("keys: key not found")
)

// The form of a generated secret: "tk_", idBytes random bytes in hex (the
// visible prefix), "_", then secretBytes random bytes in unpadded base64url.
const (
	scheme      = "tk_"
	idBytes     = 4
	secretBytes = 32
	prefixLen   = len(scheme) + 2*idBytes // "tk_3f9a2c1b"
)

// Generate returns a new random secret of the form
// "tk_<8 hex>_<43 base64url characters>": 4 random bytes that make its
// visible prefix, then 32 more (256 bits) that no prefix reveals.
func Generate() (string, error) {
	var b [idBytes + secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("keys: generate: %w", err)
	}
	return scheme + hex.EncodeToString(b[:idBytes]) + "_" + base64.RawURLEncoding.EncodeToString(b[idBytes:]), nil
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

// PrefixOf returns the visible prefix of a secret: "tk_3f9a2c1b" for a
// generated one. For a secret of another form (a demo key such as
// "demo-free") it returns a short stand-in, at most its first 4 characters
// and never more than half of it, followed by "…": never the whole secret.
func PrefixOf(secret string) string {
	if generated(secret) {
		return secret[:prefixLen]
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
// "tk_", 8 lowercase hex digits, "_".
func generated(secret string) bool {
	if len(secret) <= prefixLen+1 || secret[:len(scheme)] != scheme || secret[prefixLen] != '_' {
		return false
	}
	for _, c := range []byte(secret[len(scheme):prefixLen]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
