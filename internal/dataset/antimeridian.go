package dataset

import (
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/clip"
)

// splitAntimeridian makes the polygons of mp that cross the antimeridian
// valid as planar geometry, which is how PostGIS and orb read them. In the
// source data (converted from TopoJSON, which is spherical):
//
//   - a polygon that crosses the antimeridian (the east of Russia, part of
//     Fiji) has a ring whose longitude jumps from about 180 to -180 and
//     back. Read as planar, the jumps draw edges across the whole map and
//     the polygon covers a band of latitude around the world. Its longitudes
//     are made continuous, and it is cut into a part on each side.
//   - a polygon around a pole (Antarctica) has a coastline ring that jumps
//     once, and a ring that only runs along the pole's latitude. Read as
//     planar, the coastline is a hole in a polygon of no area, and no point
//     is inside. The coastline is closed through the pole along the map's
//     edge, and the ring of no area is dropped.
func splitAntimeridian(mp orb.MultiPolygon) orb.MultiPolygon {
	out := make(orb.MultiPolygon, 0, len(mp))
	for _, p := range mp {
		u, ok := unwrap(p)
		if !ok {
			out = append(out, p)
			continue
		}
		// The unwrapped polygon lies in [-540, 540]; each third of that
		// range is clipped out and shifted back into [-180, 180].
		for _, shift := range []float64{-360, 0, 360} {
			b := orb.Bound{Min: orb.Point{-180 + shift, -90}, Max: orb.Point{180 + shift, 90}}
			part := clip.Polygon(b, orb.Clone(u).(orb.Polygon))
			if part == nil {
				continue
			}
			for _, r := range part {
				for i := range r {
					r[i][0] -= shift
				}
			}
			out = append(out, part)
		}
	}
	return out
}

// unwrap returns p with the longitudes of each ring made continuous (each
// jump of more than 180 degrees undone by adding or subtracting 360), rings
// around a pole closed through it and rings along a pole dropped, and
// whether any ring jumped at all.
func unwrap(p orb.Polygon) (orb.Polygon, bool) {
	crossed := false
	u := make(orb.Polygon, 0, len(p))
	for _, r := range p {
		ur := make(orb.Ring, len(r), len(r)+3)
		offset := 0.0
		for j, pt := range r {
			if j > 0 {
				switch d := pt[0] - r[j-1][0]; {
				case d > 180:
					offset -= 360
					crossed = true
				case d < -180:
					offset += 360
					crossed = true
				}
			}
			ur[j] = orb.Point{pt[0] + offset, pt[1]}
		}
		if offset != 0 {
			b := ur.Bound()
			if b.Max[1]-b.Min[1] < 0.01 {
				continue // a ring along the pole's latitude, of no area
			}
			pole := 90.0
			if b.Center()[1] < 0 {
				pole = -90
			}
			first, last := ur[0], ur[len(ur)-1]
			ur = append(ur, orb.Point{last[0], pole}, orb.Point{first[0], pole}, first)
		}
		u = append(u, ur)
	}
	return u, crossed
}
