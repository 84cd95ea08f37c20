// Package winding winds polygons as RFC 7946 (section 3.1.6) wants them:
// exterior rings counter-clockwise and holes clockwise, and no ring of no
// area. The bundled dataset, the operator's own files and PostGIS tables
// answer their polygons through it.
package winding

import (
	"slices"

	"github.com/paulmach/orb"
)

// RightHand returns g with its polygons wound as RFC 7946 wants, by the
// sign of each ring's area: exterior rings counter-clockwise and holes
// clockwise. A ring of no area (fewer than four positions, a point
// repeated, a spike out and back, a sliver along a cut) is dropped, and a
// polygon whose exterior ring has no area is dropped with its holes: a
// MultiPolygon loses it, a Polygon is left with no ring. Lines and points
// are left as they are. g itself is not modified: what changes is copied.
//
// (PostGIS's ST_ForcePolygonCCW would wind polygons, but up to PostGIS 3.3
// it reverses lines too, and it keeps rings of no area.)
func RightHand(g orb.Geometry) orb.Geometry {
	switch g := g.(type) {
	case orb.Polygon:
		return polygon(g)
	case orb.MultiPolygon:
		return MultiPolygon(g)
	case orb.Collection:
		out := make(orb.Collection, len(g))
		for i, m := range g {
			out[i] = RightHand(m)
		}
		return out
	}
	return g
}

// MultiPolygon is RightHand of a MultiPolygon: its polygons wound, those
// whose exterior ring has no area left out.
func MultiPolygon(mp orb.MultiPolygon) orb.MultiPolygon {
	out := make(orb.MultiPolygon, 0, len(mp))
	for _, p := range mp {
		if p = polygon(p); len(p) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// polygon winds p's rings and drops those of no area, or every ring when
// the exterior has none.
func polygon(p orb.Polygon) orb.Polygon {
	out := make(orb.Polygon, 0, len(p))
	for i, r := range p {
		var o orb.Orientation // zero: no area
		if len(r) >= 4 {
			o = r.Orientation()
		}
		switch {
		case o == 0 && i == 0:
			return out[:0]
		case o == 0:
			continue
		case (i == 0) != (o == orb.CCW):
			r = slices.Clone(r)
			r.Reverse()
		}
		out = append(out, r)
	}
	return out
}
