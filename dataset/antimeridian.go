package dataset

import (
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/clip"
)

// splitAntimeridian cuts the polygons of mp that cross the antimeridian into
// a part on each side. In the source data such a polygon (the east of
// Russia, part of Fiji) is a ring whose longitude jumps from about 180 to
// -180 and back; read as planar geometry, as PostGIS and orb read it, the
// jump draws edges across the whole map, and the polygon would cover a band
// of latitude around the world. A ring that jumps once and does not come back
// (Antarctica's, which runs along the map's edge) is left as it is.
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
// jump of more than 180 degrees undone by adding or subtracting 360), and
// whether any ring had such a jump and closes again after unwrapping.
func unwrap(p orb.Polygon) (orb.Polygon, bool) {
	crossed := false
	u := make(orb.Polygon, len(p))
	for i, r := range p {
		u[i] = make(orb.Ring, len(r))
		offset, jumps := 0.0, 0
		for j, pt := range r {
			if j > 0 {
				switch d := pt[0] - r[j-1][0]; {
				case d > 180:
					offset -= 360
					jumps++
				case d < -180:
					offset += 360
					jumps++
				}
			}
			u[i][j] = orb.Point{pt[0] + offset, pt[1]}
		}
		if offset != 0 {
			return p, false
		}
		crossed = crossed || jumps > 0
	}
	return u, crossed
}
