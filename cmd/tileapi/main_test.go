package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

func TestRun(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	env := func(url string) func(string) string {
		return func(k string) string {
			if k == "DATABASE_URL" {
				return url
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name   string
		args   []string
		getenv func(string) string
		out    string // "" when run must fail
		err    string
	}{
		{"no command", []string{"tileapi"}, env(""), "", "usage"},
		{"unknown command", []string{"tileapi", "fly"}, env(""), "", `unknown command "fly"`},
		{"no database", []string{"tileapi", "migrate"}, env(""), "", "no database"},
		{"migrate from the environment", []string{"tileapi", "migrate"}, env(dbURL), "applied 2 migrations", ""},
		{"migrate again", []string{"tileapi", "migrate", "-database-url", dbURL}, env(""), "applied 0 migrations", ""},
		{"load", []string{"tileapi", "load"}, env(dbURL), "loaded 135233 places, 241 countries, 3231 counties", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(ctx, tc.args, tc.getenv, &stdout, &stderr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.out)
			}
		})
	}
}
