package dataset

import "github.com/paulmach/orb"

// rightHanded returns mp as RFC 7946 (section 3.1.6) wants polygons, in
// place: exterior rings counter-clockwise and holes clockwise, and no ring
// of no area. Such rings are in the source (a county's ring of one point
// repeated, a spike out and back) and come from the antimeridian cut (a
// sliver along the map's edge beside Antarctica); a polygon whose exterior
// ring has no area goes with its holes.
func rightHanded(mp orb.MultiPolygon) orb.MultiPolygon {
	out := mp[:0]
	for _, p := range mp {
		rings := p[:0]
		for i, r := range p {
			var o orb.Orientation // zero: no area
			if len(r) >= 4 {
				o = r.Orientation()
			}
			if o == 0 {
				if i == 0 {
					break
				}
				continue
			}
			if (i == 0) != (o == orb.CCW) {
				r.Reverse()
			}
			rings = append(rings, r)
		}
		if len(rings) > 0 {
			out = append(out, rings)
		}
	}
	return out
}
