package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" under the secret>", as Stripe-Signature does.
	SignatureHeader = "Tileapi-Signature"
	// EventIDHeader carries the event's id, for a receiver to deduplicate
	// before it reads the body.
	EventIDHeader = "Tileapi-Event-Id"
)

// MinSecret is the fewest bytes a signing secret may have.
const MinSecret = 32

// Errors of Verify.
var (
	ErrNoSignature = errors.New("alerts: no t= and v1= in the signature header")
	ErrSignature   = errors.New("alerts: no v1 signature matches the body")
	ErrTimestamp   = errors.New("alerts: the signature's timestamp is outside the tolerance")
)

// Sign returns the SignatureHeader value of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks header, a SignatureHeader value, against body and secret:
// one of its v1 signatures (there are two while a secret is rolled) must be
// the body's, and its timestamp within tolerance of now, so that a
// recorded delivery cannot be replayed later. Its errors are
// ErrNoSignature, ErrSignature and ErrTimestamp.
func Verify(secret, header string, body []byte, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	matched := false
	for _, s := range sigs {
		matched = matched || hmac.Equal(s, want)
	}
	if !matched {
		return ErrSignature
	}
	if age := time.Since(time.Unix(unix, 0)); age > tolerance || age < -tolerance {
		return ErrTimestamp
	}
	return nil
}
