// Package tokens mints and verifies tileapi's short-lived tokens: a JWT
// (HS256) prefixed "tkt_", that an API key's owner exchanges the key for
// on a server and hands to a web page, which never sees the key.
//
// A token names its parent key (sub), when it was issued (iat) and when
// it ends (exp, at most MaxTTL after iat), a unique id (jti) and what it
// narrows its key to: routes, layers, geofence sets, a bounding box and a
// budget of its own. A
// Signer checks all of it with no I/O: the parent key itself is the
// caller's to find.
package tokens

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/paulmach/orb"
)

// Prefix starts every token, so that it is told from an API key at a
// glance (and by a secret scanner).
const Prefix = "tkt_"

// Limits of a token.
const (
	// MinTTL and MaxTTL bound a token's lifetime, from iat to exp.
	MinTTL = time.Minute
	MaxTTL = time.Hour
	// DefaultTTL is the lifetime of a token minted with none given.
	DefaultTTL = 15 * time.Minute
	// Skew is how far in the future a token's iat may be, for servers
	// whose clocks differ a little.
	Skew = 30 * time.Second
	// MinSecret is the fewest bytes a signing secret may have (HS256's
	// key is best as long as its hash, 32 bytes).
	MinSecret = 32
	// MaxLen is the longest token Verify reads.
	MaxLen = 4096
	// MaxNames is the most routes, layers or sets a token may name each.
	MaxNames = 64
)

// The errors Verify returns, each matched with errors.Is.
var (
	// ErrMalformed is input that is not a token: no prefix, too long, not
	// a JWT, or claims of the wrong form.
	ErrMalformed = errors.New("tokens: malformed token")
	// ErrAlgorithm is a token signed otherwise than HS256 (alg none, RS256,
	// ...).
	ErrAlgorithm = errors.New("tokens: algorithm not accepted")
	// ErrSignature is a token whose signature is not ours.
	ErrSignature = errors.New("tokens: bad signature")
	// ErrExpired is a token past its exp (an *ExpiredError says when).
	ErrExpired = errors.New("tokens: expired token")
	// ErrIssuedInFuture is a token whose iat is further ahead than Skew.
	ErrIssuedInFuture = errors.New("tokens: token issued in the future")
	// ErrLifetime is a token whose exp is not after its iat, or more than
	// MaxTTL after it.
	ErrLifetime = errors.New("tokens: lifetime out of bounds")
)

// ExpiredError is a token that expired at At. It matches ErrExpired.
type ExpiredError struct{ At time.Time }

func (e *ExpiredError) Error() string {
	return "tokens: token expired at " + e.At.UTC().Format(time.RFC3339)
}

// Is makes an ExpiredError match ErrExpired.
func (e *ExpiredError) Is(target error) bool { return target == ErrExpired }

// FieldError is a bad value given to Mint: Field names it (ttl, routes,
// layers, sets, bbox, budget).
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return "tokens: " + e.Field + ": " + e.Reason }

// Narrowing is what a token limits its key to; an empty field limits
// nothing on its dimension.
type Narrowing struct {
	Routes []string `json:"routes,omitempty"`
	Layers []string `json:"layers,omitempty"`
	Sets   []string `json:"sets,omitempty"`
	// BBox, when set, bounds where the token works, in WGS84 degrees.
	BBox *BBox `json:"bbox,omitempty"`
	// Budget, when positive, is the most units the token's requests may
	// spend in its lifetime, beside its key's limits; 0 for no budget of
	// its own.
	Budget int64 `json:"budget,omitempty"`
}

// BBox is a bounding box [west, south, east, north] in WGS84 degrees, west
// at most east (a box across the antimeridian is not supported).
type BBox [4]float64

// Bound returns b as an orb.Bound.
func (b BBox) Bound() orb.Bound {
	return orb.Bound{Min: orb.Point{b[0], b[1]}, Max: orb.Point{b[2], b[3]}}
}

// Check reports what is wrong with b: a coordinate that is not finite or
// out of range, west beyond east or south beyond north.
func (b BBox) Check() error {
	for i, v := range b {
		lim := 180.0
		if i%2 == 1 {
			lim = 90
		}
		if math.IsNaN(v) || v < -lim || v > lim {
			return &FieldError{Field: "bbox", Reason: fmt.Sprintf("[w,s,e,n]: value %d must be a number in [%g, %g]", i+1, -lim, lim)}
		}
	}
	if b[0] > b[2] {
		return &FieldError{Field: "bbox", Reason: "[w,s,e,n]: west is beyond east (a box across the antimeridian is not supported)"}
	}
	if b[1] > b[3] {
		return &FieldError{Field: "bbox", Reason: "[w,s,e,n]: south is beyond north"}
	}
	return nil
}

// Check reports what is wrong with n, as a *FieldError: a list too long, a
// name empty, longer than 63 bytes or of other characters than a-z, 0-9,
// _ and -, a bad box, or a negative budget.
func (n Narrowing) Check() error {
	for _, l := range []struct {
		field string
		names []string
	}{{"routes", n.Routes}, {"layers", n.Layers}, {"sets", n.Sets}} {
		if len(l.names) > MaxNames {
			return &FieldError{Field: l.field, Reason: fmt.Sprintf("at most %d names", MaxNames)}
		}
		for _, name := range l.names {
			if !validName(name) {
				return &FieldError{Field: l.field, Reason: fmt.Sprintf("%q: a name is 1 to 63 of a-z, 0-9, _ and -", name)}
			}
		}
	}
	if n.Budget < 0 {
		return &FieldError{Field: "budget", Reason: fmt.Sprintf("%d: want a positive whole number of units", n.Budget)}
	}
	if n.BBox != nil {
		return n.BBox.Check()
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Claims is what a verified token says.
type Claims struct {
	// KeyID is the parent key's id (sub).
	KeyID int64
	// IssuedAt and ExpiresAt are iat and exp, to the second.
	IssuedAt, ExpiresAt time.Time
	// ID is the token's unique id (jti).
	ID string
	Narrowing
}

// claims is the JWT's payload.
type claims struct {
	jwt.RegisteredClaims
	Narrowing
}

// Signer mints and verifies tokens with one secret. It is safe for
// concurrent use.
type Signer struct {
	secret []byte
	now    func() time.Time
	parser *jwt.Parser
}

// Option configures a Signer.
type Option func(*Signer)

// WithClock has the Signer read the time from now, for tests.
func WithClock(now func() time.Time) Option { return func(s *Signer) { s.now = now } }

// New returns a Signer with secret, at least MinSecret bytes.
func New(secret []byte, opts ...Option) (*Signer, error) {
	if len(secret) < MinSecret {
		return nil, fmt.Errorf("tokens: signing secret of %d bytes, want at least %d", len(secret), MinSecret)
	}
	s := &Signer{secret: append([]byte(nil), secret...), now: time.Now}
	for _, o := range opts {
		o(s)
	}
	// The claims are checked by Verify itself, against the Signer's clock
	// and with errors of this package.
	s.parser = jwt.NewParser(jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding())
	return s, nil
}

// CheckTTL reports, as a *FieldError, a lifetime Mint refuses: neither 0
// (for DefaultTTL) nor from MinTTL to MaxTTL.
func CheckTTL(ttl time.Duration) error {
	if ttl != 0 && (ttl < MinTTL || ttl > MaxTTL) {
		return &FieldError{Field: "ttl", Reason: fmt.Sprintf("%s: want %s to %s", ttl, MinTTL, MaxTTL)}
	}
	return nil
}

// Mint returns a token of the key keyID valid for ttl (DefaultTTL when 0,
// otherwise MinTTL to MaxTTL) narrowed to n, and its claims. A bad ttl or
// narrowing is a *FieldError.
func (s *Signer) Mint(keyID int64, ttl time.Duration, n Narrowing) (string, Claims, error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if err := CheckTTL(ttl); err != nil {
		return "", Claims{}, err
	}
	if keyID <= 0 {
		return "", Claims{}, fmt.Errorf("tokens: key id %d: want a positive id", keyID)
	}
	if err := n.Check(); err != nil {
		return "", Claims{}, err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Claims{}, fmt.Errorf("tokens: jti: %w", err)
	}
	iat := s.now().Truncate(time.Second)
	c := Claims{KeyID: keyID, IssuedAt: iat, ExpiresAt: iat.Add(ttl), ID: base64.RawURLEncoding.EncodeToString(id[:]), Narrowing: n}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.FormatInt(keyID, 10),
			IssuedAt:  jwt.NewNumericDate(c.IssuedAt),
			ExpiresAt: jwt.NewNumericDate(c.ExpiresAt),
			ID:        c.ID,
		},
		Narrowing: n,
	})
	signed, err := t.SignedString(s.secret)
	if err != nil {
		return "", Claims{}, fmt.Errorf("tokens: sign: %w", err)
	}
	return Prefix + signed, c, nil
}

// Verify returns the claims of token if it is one of ours, signed HS256
// with the Signer's secret, issued no further ahead than Skew, not expired
// and with a lifetime of at most MaxTTL. Its errors match ErrMalformed,
// ErrAlgorithm, ErrSignature, ErrIssuedInFuture, ErrExpired or
// ErrLifetime.
func (s *Signer) Verify(token string) (Claims, error) {
	raw, ok := strings.CutPrefix(token, Prefix)
	if !ok || len(token) > MaxLen {
		return Claims{}, fmt.Errorf("%w: want %s and at most %d bytes", ErrMalformed, Prefix, MaxLen)
	}
	var c claims
	_, err := s.parser.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		// HS256 alone: never the alg a token names for itself.
		if t.Method != jwt.SigningMethodHS256 {
			return nil, fmt.Errorf("%w: %v", ErrAlgorithm, t.Header["alg"])
		}
		return s.secret, nil
	})
	switch {
	case errors.Is(err, ErrAlgorithm):
		return Claims{}, err
	case errors.Is(err, jwt.ErrTokenMalformed):
		return Claims{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	case errors.Is(err, jwt.ErrTokenUnverifiable): // alg missing or unknown
		return Claims{}, fmt.Errorf("%w: %w", ErrAlgorithm, err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return Claims{}, fmt.Errorf("%w: %w", ErrSignature, err)
	case err != nil:
		return Claims{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return s.check(c)
}

// check turns a signed payload into Claims, checking what Mint ensures.
func (s *Signer) check(c claims) (Claims, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 || c.Subject != strconv.FormatInt(id, 10) {
		return Claims{}, fmt.Errorf("%w: sub %q is not a key id", ErrMalformed, c.Subject)
	}
	if c.IssuedAt == nil || c.ExpiresAt == nil || c.ID == "" {
		return Claims{}, fmt.Errorf("%w: iat, exp and jti are required", ErrMalformed)
	}
	if err := c.Narrowing.Check(); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	out := Claims{KeyID: id, IssuedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time, ID: c.ID, Narrowing: c.Narrowing}
	if life := out.ExpiresAt.Sub(out.IssuedAt); life <= 0 || life > MaxTTL {
		return Claims{}, fmt.Errorf("%w: exp is %s after iat, want at most %s", ErrLifetime, life, MaxTTL)
	}
	now := s.now()
	if out.IssuedAt.After(now.Add(Skew)) {
		return Claims{}, fmt.Errorf("%w: iat %s", ErrIssuedInFuture, out.IssuedAt.UTC().Format(time.RFC3339))
	}
	if !now.Before(out.ExpiresAt) {
		return Claims{}, &ExpiredError{At: out.ExpiresAt}
	}
	return out, nil
}

// UnmarshalJSON reads [w,s,e,n]: exactly four numbers.
func (b *BBox) UnmarshalJSON(data []byte) error {
	var v []float64
	if err := json.Unmarshal(data, &v); err != nil || len(v) != 4 {
		return &FieldError{Field: "bbox", Reason: "want [west, south, east, north], four numbers"}
	}
	copy(b[:], v)
	return nil
}
