package keys_test

import (
	"bytes"
	"hash/crc32"
	"regexp"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/keys"
)

func TestGenerate(t *testing.T) {
	pattern := regexp.MustCompile(`^` + keys.Pattern + `$`)
	for _, kind := range []keys.Kind{keys.Publishable, keys.Secret} {
		mark := map[keys.Kind]string{keys.Publishable: "tk_pub_", keys.Secret: "tk_sec_"}[kind]
		seen := make(map[string]bool)
		for range 1000 {
			secret, err := keys.Generate(kind)
			if err != nil {
				t.Fatal(err)
			}
			if !pattern.MatchString(secret) || !strings.HasPrefix(secret, mark) {
				t.Fatalf("secret %q is not of the form %s<8 hex>_<43 base64url><6 base62>", secret, mark)
			}
			if !keys.Plausible(secret) || keys.KindOf(secret) != kind || !keys.Declares(secret, kind) {
				t.Fatalf("secret %q: plausible %v, kind %s; want plausible, %s", secret, keys.Plausible(secret), keys.KindOf(secret), kind)
			}
			if seen[secret] {
				t.Fatalf("secret %q generated twice", secret)
			}
			seen[secret] = true
			if got, want := keys.PrefixOf(secret), secret[:15]; got != want {
				t.Errorf("PrefixOf(%q) = %q, want %q", secret, got, want)
			}
			if k := (keys.Key{Prefix: keys.PrefixOf(secret)}); k.Kind() != kind {
				t.Errorf("a key of prefix %s is %s, want %s", k.Prefix, k.Kind(), kind)
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
}

// TestChecksum checks the checksum against CRC-32 computed here, digit by
// digit, and that every change of one character is caught.
func TestChecksum(t *testing.T) {
	secret, err := keys.Generate(keys.Secret)
	if err != nil {
		t.Fatal(err)
	}
	body, sum := secret[:59], secret[59:]
	n := crc32.ChecksumIEEE([]byte(body))
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	want := ""
	for range 6 {
		want = string(digits[n%62]) + want
		n /= 62
	}
	if sum != want {
		t.Errorf("checksum of %q is %q, want %q", body, sum, want)
	}
	for i := range secret {
		for _, c := range []byte("0aZ_-") {
			if secret[i] == c {
				continue
			}
			changed := secret[:i] + string(c) + secret[i+1:]
			if i >= len("tk_sec_") && keys.Plausible(changed) {
				t.Errorf("%q, one character changed, is still plausible", changed)
			}
		}
	}
}

func TestPlausible(t *testing.T) {
	good, err := keys.Generate(keys.Publishable)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		secret string
		want   bool
	}{
		{good, true},
		{"demo-free", true},
		{"key-five", true},
		{"tk_3f9a2c1b_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", true}, // the old form: no checksum
		{"", true},
		{good[:len(good)-1], false},
		{good + "0", false},
		{"tk_sec_3f9a2c1b_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG000000", false},
		{"tk_pub_", false},
		{"tk_sec_whatever", false},
		{strings.Replace(good, "tk_pub_", "tk_sec_", 1), false}, // the kind is checksummed too
		{good[:20] + "!" + good[21:], false},
	} {
		if got := keys.Plausible(tc.secret); got != tc.want {
			t.Errorf("Plausible(%q) = %v, want %v", tc.secret, got, tc.want)
		}
	}
}

func TestKind(t *testing.T) {
	for _, tc := range []struct {
		secret string
		want   keys.Kind
	}{
		{"tk_pub_3f9a2c1b_x", keys.Publishable},
		{"tk_sec_3f9a2c1b_x", keys.Secret},
		{"tk_3f9a2c1b_x", keys.Secret},
		{"demo-free", keys.Secret},
		{"tk_pub_3f9a2c1b", keys.Publishable}, // a key's prefix
	} {
		if got := keys.KindOf(tc.secret); got != tc.want {
			t.Errorf("KindOf(%q) = %s, want %s", tc.secret, got, tc.want)
		}
	}
	if keys.Declares("tk_3f9a2c1b_x", keys.Secret) || keys.Declares("demo-free", keys.Secret) || !keys.Declares("tk_sec_", keys.Secret) {
		t.Error("only the current form declares a kind")
	}
	for _, s := range []string{"publishable", "secret"} {
		if k, err := keys.ParseKind(s); err != nil || string(k) != s {
			t.Errorf("ParseKind(%q) = %q, %v", s, k, err)
		}
	}
	if _, err := keys.ParseKind("public"); err == nil || !strings.Contains(err.Error(), `"public"`) {
		t.Errorf("ParseKind(public): %v, want an error naming it", err)
	}
}

func TestPrefixOf(t *testing.T) {
	for _, tc := range []struct{ secret, want string }{
		{"tk_3f9a2c1b_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "tk_3f9a2c1b"},
		{"tk_sec_3f9a2c1b_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG000000", "tk_sec_3f9a2c1b"},
		{"tk_pub_3f9a2c1b_x", "tk_pub_3f9a2c1b"},
		{"tk_pub_3f9a2c1b", "tk_p…"},
		{"tk_pub_3F9A2C1B_x", "tk_p…"},
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

// FuzzChecksum checks that Plausible never panics, accepts no secret of
// the current form whose checksum is not its own, and that a plausible
// secret keeps a prefix that is no more than its start.
func FuzzChecksum(f *testing.F) {
	good, err := keys.Generate(keys.Secret)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{good, good[:64], "tk_pub_", "demo-free", "tk_3f9a2c1b_x", ""} {
		f.Add(s)
	}
	pattern := regexp.MustCompile(`^` + keys.Pattern + `$`)
	f.Fuzz(func(t *testing.T, secret string) {
		ok := keys.Plausible(secret)
		if strings.HasPrefix(secret, "tk_pub_") || strings.HasPrefix(secret, "tk_sec_") {
			if ok && !pattern.MatchString(secret) {
				t.Errorf("Plausible(%q) but it does not match the pattern", secret)
			}
			if ok {
				n := crc32.ChecksumIEEE([]byte(secret[:59]))
				var sum [6]byte
				for i := 5; i >= 0; i-- {
					sum[i] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[n%62]
					n /= 62
				}
				if secret[59:] != string(sum[:]) {
					t.Errorf("Plausible(%q) with a wrong checksum", secret)
				}
			}
		} else if !ok {
			t.Errorf("Plausible(%q) = false for a secret of no current form", secret)
		}
		if p := keys.PrefixOf(secret); !strings.HasSuffix(p, "…") && !strings.HasPrefix(secret, p) {
			t.Errorf("PrefixOf(%q) = %q", secret, p)
		}
	})
}
