package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

func TestRun(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	places := filepath.Join(t.TempDir(), "places.csv")
	err := os.WriteFile(places, []byte("geonameid,name,country,admin_code,feature_code,population,lon,lat\n"+
		"1,One,XX,01,PPL,10,0.5,0.5\n2,Two,XX,01,PPL,20,1.5,0.5\n"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
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
		out    string // a regular expression stdout must match
		err    string // what the error must contain, "" for none
	}{
		{"version", []string{"tileapi", "version"}, env(""), `^tileapi dev\n$`, ""},
		{"unknown command", []string{"tileapi", "fly"}, env(""), "", `unknown command "fly"`},
		{"no database", []string{"tileapi", "migrate"}, env(""), "", "no database"},
		{"migrate from the environment", []string{"tileapi", "migrate"}, env(dbURL), `^applied [1-9]\d* migrations\n$`, ""},
		{"migrate again", []string{"tileapi", "migrate", "-database-url", dbURL}, env(""), `^applied 0 migrations\n$`, ""},
		{"load the user's places", []string{"tileapi", "load", "-places", places}, env(dbURL), `^loaded 2 places, 241 countries, 3231 counties in `, ""},
		{"load a missing file", []string{"tileapi", "load", "-counties", places + ".missing"}, env(dbURL), "", "no such file"},
		{"load the bundled dataset", []string{"tileapi", "load"}, env(dbURL), `^loaded 135233 places, 241 countries, 3231 counties in `, ""},
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
			if !regexp.MustCompile(tc.out).MatchString(stdout.String()) {
				t.Errorf("stdout %q, want a match for %s", stdout.String(), tc.out)
			}
		})
	}
}

// help, -h and COMMAND -h print usage and succeed.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"}, {"help", "serve"}, {"help", "keys"},
		{"serve", "-h"}, {"migrate", "-h"}, {"load", "-h"}, {"keys", "-h"}, {"plans", "-h"}, {"healthcheck", "-h"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"tileapi"}, args...), func(string) string { return "" }, &out, &out)
		if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.Contains(strings.ToLower(out.String()), "usage") {
			t.Errorf("%v printed no usage:\n%s", args, out.String())
		}
	}
}
