package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// A token secret shorter than 32 bytes is refused at startup with one line
// that names TILEAPI_TOKEN_SECRET and does not show the secret; 32 is
// enough, and none disables tokens.
func TestTokenSecretLength(t *testing.T) {
	for _, tc := range []struct {
		secret string
		ok     bool
	}{
		{"", true},
		{"change-me", false},
		{strings.Repeat("s", 31), false},
		{strings.Repeat("é", 15), false}, // bytes, not characters: 30
		{strings.Repeat("é", 16), true},
		{strings.Repeat("s", 32), true},
	} {
		for name, getenv := range map[string]func(string) string{
			"env":  func(k string) string { return map[string]string{"TILEAPI_TOKEN_SECRET": tc.secret}[k] },
			"flag": func(string) string { return "" },
		} {
			args := []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", "none", "-plans-file", "/nonexistent"}
			if name == "flag" {
				args = append(args, "-token-secret", tc.secret)
			}
			err := run(context.Background(), args, getenv, io.Discard, io.Discard)
			// -plans-file stops a valid configuration before it serves.
			refused := err != nil && strings.Contains(err.Error(), "TILEAPI_TOKEN_SECRET")
			if refused == tc.ok {
				t.Errorf("%s: a secret of %d bytes: %v", name, len(tc.secret), err)
			}
			if refused && (strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), tc.secret)) {
				t.Errorf("%s: the refusal is not one line without the secret: %q", name, err)
			}
		}
	}
}
