package keys_test

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/tileapi/tileapi/internal/keys"
)

func TestGenerate(t *testing.T) {
	form := regexp.MustCompile(`^tk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}$`)
	seen := make(map[string]bool)
	for range 1000 {
		secret, err := keys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if !form.MatchString(secret) {
			t.Fatalf("secret %q is not of the form tk_<8 hex>_<43 base64url>", secret)
		}
		if seen[secret] {
			t.Fatalf("secret %q generated twice", secret)
		}
		seen[secret] = true
		if got, want := keys.PrefixOf(secret), secret[:11]; got != want {
			t.Errorf("PrefixOf(%q) = %q, want %q", secret, got, want)
		}
		h := keys.Hash(secret)
		if len(h) != 32 || bytes.Contains(h, []byte(secret)) || bytes.Contains([]byte(secret), h) {
			t.Fatalf("Hash(%q) = %x: not a 32-byte digest apart from the secret", secret, h)
		}
		if !bytes.Equal(h, keys.Hash(secret)) {
			t.Fatalf("Hash(%q) differs between calls", secret)
		}
	}
}

func TestPrefixOf(t *testing.T) {
	for _, tc := range []struct{ secret, want string }{
		{"tk_3f9a2c1b_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "tk_3f9a2c1b"},
		{"demo-free", "demo…"},
		{"demo-pro", "demo…"},
		{"tk_3F9A2C1B_upper-hex", "tk_3…"},
		{"tk_3f9a2c1b_", "tk_3…"},
		{"tk_3f9a2c1b", "tk_3…"},
		{"abcdef", "abc…"},
		{"ab", "a…"},
		{"a", "…"},
		{"", "…"},
		{"ключ-демо", "ключ…"},
	} {
		if got := keys.PrefixOf(tc.secret); got != tc.want {
			t.Errorf("PrefixOf(%q) = %q, want %q", tc.secret, got, tc.want)
		}
	}
}
