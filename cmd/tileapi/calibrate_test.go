package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

// calibrate times every route on a loaded database and prints a work model
// a plans file takes, and the plot.
func TestCalibrate(t *testing.T) {
	pool, _ := spatialtest.Loaded(t)
	plot := filepath.Join(t.TempDir(), "calibrate.png")
	var out bytes.Buffer
	err := run(context.Background(), []string{"tileapi", "calibrate", "-samples", "5", "-plot", plot,
		"-database-url", pool.Config().ConnString()}, func(string) string { return "" }, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^ +within +5 +[0-9.]+ +[0-9.]+ +\d+ +\d+ *$`,
		`(?m)^ +counties +5 `,
		`\{"settle":\{"per_ms":[0-9.e-]+,"per_feature":[0-9.e-]+\}\}`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("no plot: %v", err)
	}
}
