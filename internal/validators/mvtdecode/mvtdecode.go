// Package mvtdecode decodes Mapbox Vector Tiles with a decoder tileapi did
// not write, @mapbox/vector-tile, run by node on decode.mjs beside this
// file, so that tests can compare what a tile holds with what they expect
// through a reader independent of the encoder.
//
// The npm packages are installed once with
//
//	npm --prefix internal/validators ci
//
// A missing node or missing packages fail the test, or skip it under
// TEST_SKIP_MISSING, as a missing server does (see testenv).
package mvtdecode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/validators"
)

// Tile is what one tile holds, by layer name.
type Tile map[string]Layer

// Layer is one layer of a tile.
type Layer struct {
	Extent   int       `json:"extent"`
	Features []Feature `json:"features"`
}

// Feature is one feature of a layer.
type Feature struct {
	// ID is the feature's id; nil when it has none.
	ID *uint64 `json:"id"`
	// Type is 1 for a point, 2 for a line, 3 for a polygon.
	Type       int            `json:"type"`
	Properties map[string]any `json:"properties"`
	// Geometry is the feature's parts (or rings), each a list of [x, y]
	// in tile coordinates.
	Geometry [][][2]float64 `json:"geometry"`
}

// Decode decodes tiles, by name (a file name: no slashes); it fails tb if
// the decoder cannot run or a tile does not decode.
func Decode(tb testing.TB, tiles map[string][]byte) map[string]Tile {
	tb.Helper()
	script := validators.Script(tb, "decode.mjs", "@mapbox/vector-tile", "pbf")
	dir := tb.TempDir()
	for name, data := range tiles {
		if strings.ContainsAny(name, `/\`) || name == "" {
			tb.Fatalf("mvtdecode: tile name %q is not a file name", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	out := map[string]Tile{}
	validators.RunJSON(tb, script, nil, &out, dir)
	if len(out) != len(tiles) {
		tb.Fatalf("mvtdecode: %d tiles decoded of %d", len(out), len(tiles))
	}
	return out
}
