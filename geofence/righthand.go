package geofence

import (
	"slices"

	"github.com/paulmach/orb"
)

// RightHand returns g with its polygons wound as RFC 7946 (section 3.1.6)
// wants: exterior rings counter-clockwise and holes clockwise, by the sign
// of their area; rings of no area, and lines and points, are left as they
// are. g itself is not modified: what changes is copied.
//
// (PostGIS's ST_ForcePolygonCCW would do for polygons, but up to PostGIS
// 3.3 it reverses lines too.)
func RightHand(g orb.Geometry) orb.Geometry {
	switch g := g.(type) {
	case orb.Polygon:
		out := make(orb.Polygon, len(g))
		for i, r := range g {
			out[i] = r
			if o := r.Orientation(); o != 0 && (i == 0) != (o == orb.CCW) {
				out[i] = slices.Clone(r)
				out[i].Reverse()
			}
		}
		return out
	case orb.MultiPolygon:
		out := make(orb.MultiPolygon, len(g))
		for i, p := range g {
			out[i] = RightHand(p).(orb.Polygon)
		}
		return out
	case orb.Collection:
		out := make(orb.Collection, len(g))
		for i, m := range g {
			out[i] = RightHand(m)
		}
		return out
	}
	return g
}
