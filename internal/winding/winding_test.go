package winding

import (
	"testing"

	"github.com/paulmach/orb"

	"github.com/tileapi/tileapi/internal/validators/geojsoncheck"
)

// square is a counter-clockwise ring (x east, y north).
func square(x, y, size float64) orb.Ring {
	return orb.Ring{{x, y}, {x + size, y}, {x + size, y + size}, {x, y + size}, {x, y}}
}

func reversed(r orb.Ring) orb.Ring {
	out := make(orb.Ring, len(r))
	for i, p := range r {
		out[len(r)-1-i] = p
	}
	return out
}

var (
	ccw   = square(0, 0, 10)
	cw    = reversed(ccw)
	hole  = reversed(square(2, 2, 2))                             // clockwise, as a hole should be
	spike = orb.Ring{{0, 0}, {5, 5}, {0, 0}, {0, 0}}              // out and back: no area
	dot   = orb.Ring{{3, 3}, {3, 3}, {3, 3}, {3, 3}}              // a point repeated
	short = orb.Ring{{0, 0}, {1, 0}, {0, 0}}                      // too few positions
	line  = orb.LineString{{0, 0}, {1, 1}, {2, 0}}                // left as it is, whatever its turn
	skew  = orb.Ring{{20, 0}, {20, 5}, {25, 5}, {25, 0}, {20, 0}} // clockwise
)

func TestRightHand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out orb.Geometry
	}{
		{"a counter-clockwise polygon", orb.Polygon{ccw, hole}, orb.Polygon{ccw, hole}},
		{"a clockwise exterior", orb.Polygon{cw}, orb.Polygon{ccw}},
		{"a counter-clockwise hole", orb.Polygon{cw, reversed(hole)}, orb.Polygon{ccw, hole}},
		{"holes of no area", orb.Polygon{ccw, spike, hole, dot, short}, orb.Polygon{ccw, hole}},
		{"an exterior of no area", orb.Polygon{spike, hole}, orb.Polygon{}},
		{"a multipolygon", orb.MultiPolygon{{cw, dot}, {dot, hole}, {skew}}, orb.MultiPolygon{{ccw}, {reversed(skew)}}},
		{"a multipolygon of no area", orb.MultiPolygon{{spike}}, orb.MultiPolygon{}},
		{"a collection", orb.Collection{orb.Polygon{cw, dot}, line, orb.Point{1, 2}}, orb.Collection{orb.Polygon{ccw}, line, orb.Point{1, 2}}},
		{"a line", line, line},
		{"a point", orb.Point{1, 2}, orb.Point{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := orb.Clone(tc.in)
			got := RightHand(tc.in)
			if !orb.Equal(got, tc.out) {
				t.Errorf("RightHand(%v) = %v, want %v", tc.in, got, tc.out)
			}
			if !orb.Equal(tc.in, before) {
				t.Errorf("the input was modified: %v, was %v", tc.in, before)
			}
			if mp, ok := got.(orb.MultiPolygon); ok {
				for _, d := range geojsoncheck.Polygons(mp) {
					t.Error(d)
				}
			}
			if p, ok := got.(orb.Polygon); ok && len(p) > 0 {
				for _, d := range geojsoncheck.Polygons(orb.MultiPolygon{p}) {
					t.Error(d)
				}
			}
		})
	}
}
