package redislayout

import (
	"strings"
	"testing"
)

func TestEscapeIdentityIsOneToOne(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"a", "a ", "a%20", "a%2520", "{a}", "%7Ba%7D", "a:b", "a\x00", "a\x01", "ä"} {
		e := EscapeIdentity(id)
		if prev, dup := seen[e]; dup {
			t.Errorf("%q and %q both escape to %q", prev, id, e)
		}
		for _, r := range e {
			if r == '{' || r == '}' || r < 0x21 || r > 0x7e {
				t.Errorf("escape(%q) = %q holds %q", id, e, r)
			}
		}
		seen[e] = id
	}
}

// A string that is no log is an error, not an empty log.
func TestParseRejects(t *testing.T) {
	for _, bad := range []string{"", "1234567", "12345678", strings.Repeat("\x00", 200)} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}
