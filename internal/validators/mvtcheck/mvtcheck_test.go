package mvtcheck_test

import (
	"os"
	"slices"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/internal/validators/mvtcheck"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// square is a closed ring of positive area in tile coordinates (y down):
// clockwise as drawn.
func square(x, y, size float64) orb.Ring {
	return orb.Ring{{x, y}, {x + size, y}, {x + size, y + size}, {x, y + size}, {x, y}}
}

func reversed(r orb.Ring) orb.Ring {
	r = slices.Clone(r)
	r.Reverse()
	return r
}

// TestCheck runs the checker over one tile for each defect it must find,
// and over valid polygons, in which it must find none.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		geom orb.Geometry
		want []string // the kinds of defects, in order
	}{
		{"square", orb.Polygon{square(0, 0, 10)}, nil},
		{"square-with-hole", orb.Polygon{square(0, 0, 10), reversed(square(2, 2, 4))}, nil},
		{"hole-touching-exterior", orb.Polygon{square(0, 0, 10), reversed(orb.Ring{{0, 5}, {5, 3}, {5, 7}, {0, 5}})}, nil},
		{"two-polygons", orb.MultiPolygon{{square(0, 0, 10)}, {square(20, 0, 10), reversed(square(22, 2, 4))}}, nil},
		{"bowtie", orb.Polygon{{{0, 0}, {10, 10}, {10, 0}, {0, 10}, {0, 0}}}, []string{"self-intersection", "zero-area"}},
		{"figure-eight", orb.Polygon{{{0, 0}, {5, 5}, {10, 0}, {10, 10}, {5, 5}, {0, 10}, {0, 0}}}, []string{"self-tangency"}},
		{"vertex-on-edge", orb.Polygon{{{0, 0}, {10, 0}, {10, 10}, {5, 0}, {0, 10}, {0, 0}}}, []string{"self-intersection", "self-intersection"}},
		{"spike", orb.Polygon{{{0, 0}, {10, 0}, {15, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}}, []string{"self-tangency"}},
		{"fold-back", orb.Polygon{{{0, 0}, {15, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}}, []string{"spike", "self-intersection"}},
		{"repeated-point", orb.Polygon{{{0, 0}, {10, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}}, []string{"repeated-point"}},
		{"counter-clockwise", orb.Polygon{reversed(square(0, 0, 10))}, []string{"first-ring-not-exterior"}},
		{"flat", orb.Polygon{{{0, 0}, {5, 0}, {10, 0}, {0, 0}}}, []string{"spike", "spike", "zero-area"}},
		{"hole-outside", orb.Polygon{square(0, 0, 10), reversed(square(20, 20, 4))}, []string{"hole-outside"}},
		{"holes-overlapping", orb.Polygon{square(0, 0, 10), reversed(square(1, 1, 4)), reversed(square(3, 3, 4))}, []string{"rings-cross"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := geojson.NewFeature(tc.geom)
			f.ID = uint64(7)
			b, err := mvt.Marshal(mvt.Layers{{Name: "test", Version: 2, Extent: 4096, Features: []*geojson.Feature{f}}})
			if err != nil {
				t.Fatal(err)
			}
			r := mvtcheck.Check(t, []mvtcheck.Tile{{Name: tc.name + ".mvt", Data: b}})
			var kinds []string
			for _, d := range r.Defects {
				kinds = append(kinds, d.Kind)
				t.Log(d)
			}
			if !slices.Equal(kinds, tc.want) {
				t.Errorf("defects %q, want %q", kinds, tc.want)
			}
			if r.Features != 1 || r.Rings == 0 {
				t.Errorf("%d features, %d rings", r.Features, r.Rings)
			}
		})
	}
}
