package geojsoncheck_test

import (
	"os"
	"slices"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/internal/validators/geojsoncheck"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// square is a counter-clockwise ring (x east, y north).
func square(x, y, size float64) orb.Ring {
	return orb.Ring{{x, y}, {x + size, y}, {x + size, y + size}, {x, y + size}, {x, y}}
}

func reversed(r orb.Ring) orb.Ring {
	r = slices.Clone(r)
	r.Reverse()
	return r
}

// cases are polygons each checker must find fault with, or not: hint is
// whether geojsonhint breaks the right-hand rule, invalid whether JSTS finds
// the geometry invalid, defects how many rings Polygons reports.
var cases = []struct {
	name    string
	mp      orb.MultiPolygon
	hint    bool
	invalid bool
	defects int
}{
	{"square", orb.MultiPolygon{{square(0, 0, 10)}}, false, false, 0},
	{"square with hole", orb.MultiPolygon{{square(0, 0, 10), reversed(square(2, 2, 4))}}, false, false, 0},
	{"triangle", orb.MultiPolygon{{{{0, 0}, {1, 0}, {0, 1}, {0, 0}}}}, false, false, 0},
	{"clockwise exterior", orb.MultiPolygon{{reversed(square(0, 0, 10))}}, true, false, 1},
	{"counter-clockwise hole", orb.MultiPolygon{{square(0, 0, 10), square(2, 2, 4)}}, true, false, 1},
	// The part the antimeridian cut left of Antarctica (issue 21).
	{"sliver along the antimeridian", orb.MultiPolygon{{square(-170, -80, 5)}, {{{180, -84.35}, {180, -84.35}, {180, -90}, {180, -90}, {180, -84.35}}}}, true, true, 1},
	{"spike of no area", orb.MultiPolygon{{{{0, 0}, {1, 1}, {0, 0}, {0, 0}}}}, true, true, 1},
	{"bow tie", orb.MultiPolygon{{{{0, 0}, {1, 1}, {1, 0}, {0, 1}, {0, 0}}}}, true, true, 1},
	{"out of range", orb.MultiPolygon{{square(179, 0, 2)}}, false, false, 1},
}

// TestCheck runs the npm validators over one document per case.
func TestCheck(t *testing.T) {
	docs := make([]geojsoncheck.Doc, len(cases))
	for i, tc := range cases {
		f := geojson.NewFeature(tc.mp)
		f.ID = i
		b, err := f.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = geojsoncheck.Doc{Name: tc.name, Body: string(b)}
	}
	docs = append(docs, geojsoncheck.Doc{Name: "not JSON", Body: "{"})
	rs := geojsoncheck.Check(t, docs)
	for i, tc := range cases {
		r := rs[i]
		rhr := slices.ContainsFunc(r.Hints, func(h geojsoncheck.Hint) bool {
			return h.Message == "Polygons and MultiPolygons should follow the right-hand rule"
		})
		if rhr != tc.hint || len(r.Hints) > 1 || (len(r.Hints) == 1 && !rhr) {
			t.Errorf("%s: geojsonhint says %+v; want the right-hand rule broken: %v", tc.name, r.Hints, tc.hint)
		}
		if (len(r.Invalid) > 0) != tc.invalid {
			t.Errorf("%s: JSTS says %+v; want invalid: %v", tc.name, r.Invalid, tc.invalid)
		}
	}
	if last := rs[len(rs)-1]; len(last.Hints) == 0 || last.Hints[0].Level != "error" {
		t.Errorf("not JSON: geojsonhint says %+v; want an error", last.Hints)
	}
}

func TestPolygons(t *testing.T) {
	for _, tc := range cases {
		if got := geojsoncheck.Polygons(tc.mp); len(got) != tc.defects {
			t.Errorf("%s: %q; want %d defects", tc.name, got, tc.defects)
		}
	}
}
