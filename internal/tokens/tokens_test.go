package tokens_test

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tileapi/tileapi/internal/tokens"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// clock is a settable time for a Signer.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newSigner(t testing.TB, c *clock) *tokens.Signer {
	t.Helper()
	s, err := tokens.New(secret, tokens.WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var start = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestMintVerify(t *testing.T) {
	c := &clock{start}
	s := newSigner(t, c)
	n := tokens.Narrowing{Routes: []string{"tiles", "within"}, Layers: []string{"places"}, Sets: []string{"places"}, BBox: &tokens.BBox{12, 41, 13, 42.5}, Budget: 40}
	tok, minted, err := s.Mint(7, 10*time.Minute, n)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, tokens.Prefix) {
		t.Fatalf("token %q lacks the prefix", tok)
	}
	got, err := s.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.KeyID != 7 || !got.IssuedAt.Equal(start) || !got.ExpiresAt.Equal(start.Add(10*time.Minute)) || got.ID == "" || got.ID != minted.ID {
		t.Fatalf("claims %+v, minted %+v", got, minted)
	}
	if strings.Join(got.Routes, ",") != "tiles,within" || got.Layers[0] != "places" || got.Sets[0] != "places" || *got.BBox != *n.BBox || got.Budget != 40 {
		t.Fatalf("narrowing %+v, want %+v", got.Narrowing, n)
	}
	other, _, _ := s.Mint(7, 0, tokens.Narrowing{})
	o, err := s.Verify(other)
	if err != nil || o.ID == got.ID || o.ExpiresAt.Sub(o.IssuedAt) != tokens.DefaultTTL || o.BBox != nil || o.Routes != nil || o.Budget != 0 {
		t.Fatalf("default token %+v, %v", o, err)
	}
	// Valid until exp, not at it.
	c.t = start.Add(10*time.Minute - time.Second)
	if _, err := s.Verify(tok); err != nil {
		t.Fatalf("a second before exp: %v", err)
	}
	c.t = start.Add(10 * time.Minute)
	var exp *tokens.ExpiredError
	if _, err := s.Verify(tok); !errors.Is(err, tokens.ErrExpired) || !errors.As(err, &exp) || !exp.At.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("at exp: %v", err)
	}
}

func TestMintRefuses(t *testing.T) {
	s := newSigner(t, &clock{start})
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		n     tokens.Narrowing
		field string
	}{
		{"ttl too long", time.Hour + time.Second, tokens.Narrowing{}, "ttl"},
		{"ttl too short", 59 * time.Second, tokens.Narrowing{}, "ttl"},
		{"ttl negative", -time.Minute, tokens.Narrowing{}, "ttl"},
		{"empty route", time.Minute, tokens.Narrowing{Routes: []string{""}}, "routes"},
		{"bad layer", time.Minute, tokens.Narrowing{Layers: []string{"Places"}}, "layers"},
		{"bad set", time.Minute, tokens.Narrowing{Sets: []string{"a b"}}, "sets"},
		{"too many", time.Minute, tokens.Narrowing{Sets: make([]string, tokens.MaxNames+1)}, "sets"},
		{"west beyond east", time.Minute, tokens.Narrowing{BBox: &tokens.BBox{10, 0, 5, 1}}, "bbox"},
		{"south beyond north", time.Minute, tokens.Narrowing{BBox: &tokens.BBox{0, 10, 5, 1}}, "bbox"},
		{"lat out of range", time.Minute, tokens.Narrowing{BBox: &tokens.BBox{0, -91, 5, 1}}, "bbox"},
		{"lng out of range", time.Minute, tokens.Narrowing{BBox: &tokens.BBox{0, 0, 180.5, 1}}, "bbox"},
		{"negative budget", time.Minute, tokens.Narrowing{Budget: -1}, "budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Mint(1, tc.ttl, tc.n)
			var fe *tokens.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err %v, want a FieldError for %s", err, tc.field)
			}
		})
	}
	if _, _, err := s.Mint(0, time.Minute, tokens.Narrowing{}); err == nil {
		t.Fatal("key id 0 minted")
	}
	if _, err := tokens.New(secret[:31]); err == nil {
		t.Fatal("a 31-byte secret accepted")
	}
}

// sign makes a token as anyone could, with any claims, method and key.
func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tokens.Prefix + s
}

func TestVerifyRefuses(t *testing.T) {
	s := newSigner(t, &clock{start})
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"sub": "7", "iat": start.Unix(), "exp": start.Add(time.Hour).Unix(), "jti": "x"}
	}
	with := func(k string, v any) jwt.MapClaims {
		c := good()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	if _, err := s.Verify(sign(t, jwt.SigningMethodHS256, secret, good())); err != nil {
		t.Fatalf("a token signed by hand: %v", err)
	}
	minted, _, _ := s.Mint(7, time.Minute, tokens.Narrowing{})
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, good()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"another secret", sign(t, jwt.SigningMethodHS256, []byte("another secret, 32 bytes or more."), good()), tokens.ErrSignature},
		{"signature altered", minted[:len(minted)-2] + "AA", tokens.ErrSignature},
		{"alg none", tokens.Prefix + none, tokens.ErrAlgorithm},
		{"RS256", sign(t, jwt.SigningMethodRS256, rsaKey, good()), tokens.ErrAlgorithm},
		{"HS512 with our secret", sign(t, jwt.SigningMethodHS512, secret, good()), tokens.ErrAlgorithm},
		{"alg unknown", tokens.Prefix + "eyJhbGciOiJYWVoiLCJ0eXAiOiJKV1QifQ.e30.AA", tokens.ErrAlgorithm},
		{"expired", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "7", "iat": start.Add(-time.Hour).Unix(), "exp": start.Unix(), "jti": "x"}), tokens.ErrExpired},
		{"issued in the future", sign(t, jwt.SigningMethodHS256, secret, with("iat", start.Add(tokens.Skew+time.Second).Unix())), tokens.ErrIssuedInFuture},
		{"lifetime over an hour", sign(t, jwt.SigningMethodHS256, secret, with("exp", start.Add(time.Hour+time.Second).Unix())), tokens.ErrLifetime},
		{"exp before iat", sign(t, jwt.SigningMethodHS256, secret, with("iat", start.Add(2*time.Hour).Unix())), tokens.ErrLifetime},
		{"no exp", sign(t, jwt.SigningMethodHS256, secret, with("exp", nil)), tokens.ErrMalformed},
		{"no iat", sign(t, jwt.SigningMethodHS256, secret, with("iat", nil)), tokens.ErrMalformed},
		{"no jti", sign(t, jwt.SigningMethodHS256, secret, with("jti", nil)), tokens.ErrMalformed},
		{"sub not an id", sign(t, jwt.SigningMethodHS256, secret, with("sub", "07")), tokens.ErrMalformed},
		{"sub negative", sign(t, jwt.SigningMethodHS256, secret, with("sub", "-1")), tokens.ErrMalformed},
		{"bbox of three", sign(t, jwt.SigningMethodHS256, secret, with("bbox", []float64{1, 2, 3})), tokens.ErrMalformed},
		{"bbox inverted", sign(t, jwt.SigningMethodHS256, secret, with("bbox", []float64{3, 2, 1, 4})), tokens.ErrMalformed},
		{"bad layer name", sign(t, jwt.SigningMethodHS256, secret, with("layers", []string{"../x"})), tokens.ErrMalformed},
		{"no prefix", strings.TrimPrefix(minted, tokens.Prefix), tokens.ErrMalformed},
		{"an API key", "tk_3f9a2c1b_abc", tokens.ErrMalformed},
		{"empty", "", tokens.ErrMalformed},
		{"two segments", tokens.Prefix + "a.b", tokens.ErrMalformed},
		{"garbage", tokens.Prefix + "!!.??.**", tokens.ErrMalformed},
		{"too long", minted + strings.Repeat("A", tokens.MaxLen), tokens.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Verify(tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	c := &clock{start}
	s := newSigner(f, c)
	minted, _, _ := s.Mint(3, time.Minute, tokens.Narrowing{Routes: []string{"tiles"}, BBox: &tokens.BBox{-1, -1, 1, 1}})
	for _, seed := range []string{minted, "", tokens.Prefix, tokens.Prefix + "a.b.c", minted[:len(minted)/2], "tk_3f9a2c1b_x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		got, err := s.Verify(token)
		if err != nil {
			for _, e := range []error{tokens.ErrMalformed, tokens.ErrAlgorithm, tokens.ErrSignature, tokens.ErrExpired, tokens.ErrIssuedInFuture, tokens.ErrLifetime} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("untyped error %v", err)
		}
		// Only what we signed verifies: a token with a valid signature
		// holds claims Mint would make.
		if got.KeyID <= 0 || got.ID == "" || got.ExpiresAt.Sub(got.IssuedAt) > tokens.MaxTTL || got.Narrowing.Check() != nil {
			t.Fatalf("verified claims %+v", got)
		}
	})
}
