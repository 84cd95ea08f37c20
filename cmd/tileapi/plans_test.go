package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestPlansCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(file, []byte(`{"plans": [{"name": "tiny", "max_radius_m": 3000,
		"limits": [{"name": "w", "max": 5, "window": "10s"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	getenv := func(k string) string {
		if k == "TILEAPI_PLANS_FILE" {
			return file
		}
		return ""
	}
	if err := run(context.Background(), []string{"tileapi", "plans"}, getenv, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^free +100 per 5s \(burst\), 600 per 1m0s \(minute\) +20000 m +20000 m$`,
		`(?m)^tiny +5 per 10s \(w\) +3000 m +4472 m$`,
		`(?m)^free +1 +1 +7 +25 +100 +625$`,
		`(?m)^pro places +16/4 +16/4 +16/4 +16/4 +16/4 +4/1 +1/1 +1/1 +1/1$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
}
