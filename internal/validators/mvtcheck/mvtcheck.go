// Package mvtcheck checks the polygons of Mapbox Vector Tiles against the
// MVT specification 2.1 (section 4.3.4.4: rings that neither self-intersect
// nor self-touch, exterior rings of positive area, holes inside them) with a
// decoder tileapi did not write: @mapbox/vector-tile, run by node on
// check.mjs beside this file.
//
// The npm packages are installed once with
//
//	npm --prefix internal/validators ci
//
// A missing node or missing packages fail the test, or skip it under
// TEST_SKIP_MISSING, as a missing server does (see testenv).
package mvtcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/validators"
)

// Tile is one encoded tile and the name its defects are reported under.
type Tile struct {
	Name string // a file name: no slashes
	Data []byte
}

// Report is what check.mjs found over a set of tiles.
type Report struct {
	Tiles    int      `json:"tiles"`
	Features int      `json:"features"` // of every type
	Polygons int      `json:"polygons"` // the polygons of polygon features
	Rings    int      `json:"rings"`    // the rings of polygon features
	Defects  []Defect `json:"defects"`
}

// Defect is one way a ring breaks the specification.
type Defect struct {
	Tile    string `json:"tile"`
	Layer   string `json:"layer"`
	Feature any    `json:"feature"` // its id, as the decoder reads it
	Ring    int    `json:"ring"`    // its index among the feature's rings
	Kind    string `json:"kind"`    // self-intersection, self-tangency, spike, zero-area, ...
	Detail  string `json:"detail"`
}

// String reads like a line of a test log.
func (d Defect) String() string {
	return fmt.Sprintf("%s: %s feature %v ring %d: %s: %s", d.Tile, d.Layer, d.Feature, d.Ring, d.Kind, d.Detail)
}

// BadRings returns how many rings have at least one defect.
func (r Report) BadRings() int {
	type ring struct {
		tile, layer, feature string
		ring                 int
	}
	bad := map[ring]bool{}
	for _, d := range r.Defects {
		bad[ring{d.Tile, d.Layer, fmt.Sprint(d.Feature), d.Ring}] = true
	}
	return len(bad)
}

// Check decodes and checks tiles, and returns what it found; it fails tb if
// the checker cannot run.
func Check(tb testing.TB, tiles []Tile) Report {
	tb.Helper()
	script := validators.Script(tb, "check.mjs", "@mapbox/vector-tile", "pbf")
	dir := tb.TempDir()
	for _, t := range tiles {
		if strings.ContainsAny(t.Name, `/\`) || t.Name == "" {
			tb.Fatalf("mvtcheck: tile name %q is not a file name", t.Name)
		}
		if err := os.WriteFile(filepath.Join(dir, t.Name), t.Data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	var r Report
	validators.RunJSON(tb, script, nil, &r, dir)
	if r.Tiles != len(tiles) {
		tb.Fatalf("mvtcheck: %d tiles checked of %d", r.Tiles, len(tiles))
	}
	return r
}
