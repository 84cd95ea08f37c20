package tiles

import (
	"fmt"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/internal/validators/mvtcheck"
)

// TestRepair repairs the kinds of invalid polygon that clipping,
// simplification and the grid make, and checks the result with mvtcheck and
// by its polygons, rings and area.
func TestRepair(t *testing.T) {
	for _, tc := range []struct {
		name            string
		p               orb.Polygon
		polygons, rings int
		area2           float64 // twice the total area
	}{
		{"valid", orb.Polygon{{{0, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}}, 1, 1, 200},
		// Clipped along the box edge x=0 between two visits: a doubled edge.
		{"doubled-edge", orb.Polygon{{{0, 0}, {10, 0}, {10, 4}, {0, 4}, {0, 6}, {10, 6}, {10, 10}, {0, 10}, {0, 0}}}, 2, 2, 160},
		{"figure-eight", orb.Polygon{{{0, 0}, {10, 0}, {5, 5}, {10, 10}, {0, 10}, {5, 5}, {0, 0}}}, 2, 2, 100},
		{"spike", orb.Polygon{{{0, 0}, {10, 0}, {10, 5}, {20, 5}, {10, 5}, {10, 10}, {0, 10}, {0, 0}}}, 1, 1, 200},
		{"bowtie", orb.Polygon{{{0, 0}, {10, 10}, {10, 0}, {0, 10}, {0, 0}}}, 1, 1, 50},
		{"hole-crossing-shell", orb.Polygon{{{0, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}, {{8, 2}, {8, 8}, {12, 8}, {12, 2}, {8, 2}}}, 1, 1, 176},
		{"hole-touching-shell", orb.Polygon{{{0, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}, {{10, 5}, {5, 3}, {5, 7}, {10, 5}}}, 1, 2, 180},
		{"hole-outside", orb.Polygon{{{0, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}, {{20, 20}, {20, 30}, {30, 30}, {30, 20}, {20, 20}}}, 1, 1, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var segs []segment
			mp := repair(tc.p, &segs)
			rings, area := 0, 0.0
			for _, p := range mp {
				rings += len(p)
				for _, r := range p {
					area += area2(r)
				}
			}
			if len(mp) != tc.polygons || rings != tc.rings || area != tc.area2 {
				t.Errorf("%v: %d polygons, %d rings, twice the area %g; want %d, %d, %g", mp, len(mp), rings, area, tc.polygons, tc.rings, tc.area2)
			}
			f := geojson.NewFeature(mp)
			f.ID, f.Properties = uint64(1), geojson.Properties{"name": tc.name}
			b, err := mvt.Marshal(mvt.Layers{{Name: "test", Version: 2, Extent: Extent, Features: []*geojson.Feature{f}}})
			if err != nil {
				t.Fatal(err)
			}
			if rep := mvtcheck.Check(t, []mvtcheck.Tile{{Name: fmt.Sprintf("%s.mvt", tc.name), Data: b}}); len(rep.Defects) > 0 {
				t.Errorf("%v: %v", mp, rep.Defects)
			}
		})
	}
}
