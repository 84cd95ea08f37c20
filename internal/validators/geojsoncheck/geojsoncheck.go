// Package geojsoncheck checks GeoJSON documents against RFC 7946 with
// validators tileapi did not write, run by node on check.mjs beside this
// file: @mapbox/geojsonhint (the format, and the right-hand rule of section
// 3.1.6: exterior rings counter-clockwise, holes clockwise) and JSTS's
// IsValidOp (the OGC validity of each polygon: rings of too few distinct
// points, self-intersections, holes outside their shell). Polygons is the
// same kind of check in Go, quick enough to run over every fence.
//
// The npm packages are installed once with
//
//	npm --prefix internal/validators ci
//
// A missing node or missing packages fail the test, or skip it under
// TEST_SKIP_MISSING, as a missing server does (see testenv).
package geojsoncheck

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/paulmach/orb"

	"github.com/tileapi/tileapi/internal/validators"
)

// Doc is one GeoJSON text and the name its findings are reported under.
type Doc struct {
	Name string `json:"name"`
	Body string `json:"body"`
}

// Result is what check.mjs found in one document.
type Result struct {
	Name    string    `json:"name"`
	Hints   []Hint    `json:"hints"`   // geojsonhint's messages
	Invalid []Invalid `json:"invalid"` // JSTS's validity errors, one per invalid feature
}

// Hint is a message of geojsonhint; Level is "error" or "message" (the
// right-hand rule is a "message").
type Hint struct {
	Message string `json:"message"`
	Level   string `json:"level"`
}

// Invalid is the first validity error JSTS found in a feature's geometry.
type Invalid struct {
	Feature any        `json:"feature"` // its id, as JSON has it
	Message string     `json:"message"`
	At      [2]float64 `json:"at"`
}

// Check runs both validators over docs and returns one Result per document,
// in their order; it fails tb if the validators cannot run.
func Check(tb testing.TB, docs []Doc) []Result {
	tb.Helper()
	script := validators.Script(tb, "check.mjs", "@mapbox/geojsonhint", "jsts")
	in, err := json.Marshal(docs)
	if err != nil {
		tb.Fatal(err)
	}
	var rs []Result
	validators.RunJSON(tb, script, in, &rs)
	if len(rs) != len(docs) {
		tb.Fatalf("geojsoncheck: %d documents checked of %d", len(rs), len(docs))
	}
	return rs
}

// Polygons returns the ways mp breaks RFC 7946 and the rings' validity that
// can be seen ring by ring: a ring not closed, of fewer than four positions
// or three distinct ones, or of no area; an exterior ring that is not
// counter-clockwise or a hole that is not clockwise (section 3.1.6); a
// position outside [-180, 180] x [-90, 90].
func Polygons(mp orb.MultiPolygon) []string {
	var defects []string
	for i, p := range mp {
		for j, r := range p {
			at := fmt.Sprintf("polygon %d ring %d", i, j)
			for _, pt := range r {
				if !(math.Abs(pt[0]) <= 180 && math.Abs(pt[1]) <= 90) {
					defects = append(defects, fmt.Sprintf("%s: position %v out of range", at, pt))
					break
				}
			}
			if len(r) < 4 || r[0] != r[len(r)-1] {
				defects = append(defects, fmt.Sprintf("%s: %d positions, not a closed ring of four or more", at, len(r)))
				continue
			}
			distinct := map[orb.Point]bool{}
			for _, pt := range r {
				distinct[pt] = true
			}
			o := r.Orientation() // by the signed area about the first position
			switch {
			case len(distinct) < 3 || o == 0:
				defects = append(defects, fmt.Sprintf("%s: no area (%d distinct positions, from %v)", at, len(distinct), r[0]))
			case j == 0 && o != orb.CCW:
				defects = append(defects, fmt.Sprintf("%s: exterior ring clockwise (from %v)", at, r[0]))
			case j > 0 && o != orb.CW:
				defects = append(defects, fmt.Sprintf("%s: hole counter-clockwise (from %v)", at, r[0]))
			}
		}
	}
	return defects
}
