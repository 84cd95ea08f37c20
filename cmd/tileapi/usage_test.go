package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/spatialtest"
	usagehist "github.com/tileapi/tileapi/internal/usage"
)

// usage prints a key's history from PostgreSQL, by hour and layer, with
// its total, and plots it.
func TestUsageCommand(t *testing.T) {
	pool := spatialtest.Migrated(t)
	l := ledger.New(pool, ledger.Options{})
	t0 := time.Date(2026, 3, 10, 22, 0, 0, 0, time.UTC)
	for i, layer := range []string{"roads", "places", "roads"} {
		l.AddUsage(usagehist.Row{Identity: "key:4", KeyID: 4, Start: t0.Add(time.Duration(i) * time.Hour), Route: "tile", Layer: layer, Requests: 2, Charged: 20, GivenBack: 5, Overage: 3, Refused429: 1})
	}
	l.AddUsage(usagehist.Row{Identity: "key:5", KeyID: 5, Start: t0, Route: "tile", Layer: "roads", Requests: 9, Charged: 90})
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	plot := filepath.Join(t.TempDir(), "usage.png")
	var out bytes.Buffer
	err := run(context.Background(), []string{"tileapi", "usage", "-key", "4", "-from", "2026-03-10T00:00:00Z", "-to", "2026-03-11T12:00:00Z",
		"-group", "layer", "-plot", plot, "-database-url", pool.Config().ConnString()}, func(string) string { return "" }, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^ *2026-03-10T22:00:00Z +key:4 +tile +roads +2 +20 +5 +15 +3 +0 +1 +0 *$`,
		`(?m)^ *2026-03-11T00:00:00Z +key:4 +tile +roads +2 `,
		`(?m)^ *total +6 +60 +15 +45 +9 +0 +3 +0 *$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("the plot is no PNG: %v", err)
	}
}
