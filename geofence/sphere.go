package geofence

import (
	"math"

	"github.com/paulmach/orb"
)

// The distance from a point to a geometry as PostGIS measures it on
// geography: the geometry's edges are great-circle arcs of the sphere
// (latitudes taken as they are), the point of the geometry nearest the
// query point is found on that sphere, and the distance to it is measured
// on the spheroid; a polygon covering the point is at distance 0.
// Polygons are taken to be smaller than a hemisphere.

// vec is a point of the unit sphere, in earth-centred coordinates.
type vec [3]float64

func unitVec(p orb.Point) vec {
	sinLat, cosLat := math.Sincos(radians(p[1]))
	sinLng, cosLng := math.Sincos(radians(p[0]))
	return vec{cosLat * cosLng, cosLat * sinLng, sinLat}
}

// point is v's longitude and latitude; v need not be of unit length.
func (v vec) point() orb.Point {
	return orb.Point{degrees(math.Atan2(v[1], v[0])), degrees(math.Atan2(v[2], math.Hypot(v[0], v[1])))}
}

func dot(a, b vec) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

func cross(a, b vec) vec {
	return vec{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

func (v vec) norm() float64 { return math.Sqrt(dot(v, v)) }

func (v vec) scale(s float64) vec { return vec{v[0] * s, v[1] * s, v[2] * s} }

// angle is the angle in radians between a and b, precise when it is small.
func angle(a, b vec) float64 { return math.Atan2(cross(a, b).norm(), dot(a, b)) }

// normal is a × b for the unit vectors of a and b, computed from their
// latitudes and longitudes so that it keeps its precision when they are
// close together (the short edges of real data).
func normal(a, b orb.Point) vec {
	lat1, lng1, lat2, lng2 := radians(a[1]), radians(a[0]), radians(b[1]), radians(b[0])
	sinSum, cosSum := math.Sincos(-(lng1 + lng2) / 2)
	sinDiff, cosDiff := math.Sincos((lng2 - lng1) / 2)
	sinLatDiff, sinLatSum := math.Sin(lat1-lat2), math.Sin(lat1+lat2)
	return vec{
		sinLatDiff*sinSum*cosDiff - sinLatSum*cosSum*sinDiff,
		sinLatDiff*cosSum*cosDiff + sinLatSum*sinSum*sinDiff,
		math.Cos(lat1) * math.Cos(lat2) * math.Sin(lng2-lng1),
	}
}

// nearest finds the point of a geometry nearest to p on the sphere.
type nearest struct {
	p     vec
	angle float64 // from p to at, radians
	at    orb.Point
	found bool
}

func (n *nearest) vertex(q orb.Point) {
	if a := angle(n.p, unitVec(q)); !n.found || a < n.angle {
		n.angle, n.at, n.found = a, q, true
	}
}

// edge considers the great-circle arc from a to b: its point nearest p is
// p's projection on the arc's great circle where that lies on the arc, and
// otherwise an end.
func (n *nearest) edge(a, b orb.Point) {
	n.vertex(a)
	n.vertex(b)
	if a == b {
		return
	}
	nrm := normal(a, b)
	l := nrm.norm()
	if l == 0 {
		return // antipodal or equal ends: no one arc
	}
	nrm = nrm.scale(1 / l)
	k := n.p
	k = vec{k[0] - nrm[0]*dot(k, nrm), k[1] - nrm[1]*dot(k, nrm), k[2] - nrm[2]*dot(k, nrm)}
	kl := k.norm()
	if kl == 0 {
		return // p is a pole of the great circle: the ends are as near as any point
	}
	k = k.scale(1 / kl)
	va, vb := unitVec(a), unitVec(b)
	if dot(cross(va, k), nrm) < 0 || dot(cross(k, vb), nrm) < 0 {
		return // beyond an end
	}
	if ang := angle(n.p, k); ang < n.angle {
		n.angle, n.at = ang, k.point()
	}
}

func (n *nearest) path(ps []orb.Point) {
	if len(ps) == 1 {
		n.vertex(ps[0])
	}
	for i := 1; i < len(ps); i++ {
		n.edge(ps[i-1], ps[i])
	}
}

func (n *nearest) geometry(g orb.Geometry) {
	switch g := g.(type) {
	case orb.Point:
		n.vertex(g)
	case orb.MultiPoint:
		for _, p := range g {
			n.vertex(p)
		}
	case orb.LineString:
		n.path(g)
	case orb.MultiLineString:
		for _, ls := range g {
			n.path(ls)
		}
	case orb.Polygon:
		for _, r := range g {
			n.path(r)
		}
	case orb.MultiPolygon:
		for _, p := range g {
			n.geometry(p)
		}
	case orb.Collection:
		for _, m := range g {
			n.geometry(m)
		}
	}
}

// geoDistance is the distance in metres from c to g, as PostGIS's
// ST_Distance on geography measures it; +Inf if g is empty.
func geoDistance(c orb.Point, g orb.Geometry) float64 {
	if p, ok := g.(orb.Point); ok {
		return spheroidDistance(c, p)
	}
	if sphereCovers(c, g) {
		return 0
	}
	n := nearest{p: unitVec(c)}
	n.geometry(g)
	if !n.found {
		return math.Inf(1)
	}
	return spheroidDistance(c, n.at)
}

// sphereCovers reports whether a polygon of g covers c, its edges being
// great-circle arcs.
func sphereCovers(c orb.Point, g orb.Geometry) bool {
	switch g := g.(type) {
	case orb.Polygon:
		if len(g) == 0 || !sphereRingCovers(c, g[0]) {
			return false
		}
		for _, hole := range g[1:] {
			if sphereRingCovers(c, hole) {
				return false // inside the hole, or on its boundary, which is at distance 0 anyway
			}
		}
		return true
	case orb.MultiPolygon:
		for _, p := range g {
			if sphereCovers(c, p) {
				return true
			}
		}
	case orb.Collection:
		for _, m := range g {
			if sphereCovers(c, m) {
				return true
			}
		}
	}
	return false
}

// sphereRingCovers reports whether the ring r winds around c: the
// directions from c to its vertices turn a whole turn as the ring is
// followed. The turn along an arc that passes neither through c nor
// through its antipode is less than half a turn, so it is the difference
// of the directions to its ends, taken in (-π, π].
func sphereRingCovers(c orb.Point, r orb.Ring) bool {
	if len(r) < 4 {
		return false
	}
	total := 0.0
	prev, ok := bearing(c, r[0])
	if !ok {
		return true // a vertex
	}
	for _, q := range r[1:] {
		b, ok := bearing(c, q)
		if !ok {
			return true
		}
		d := b - prev
		switch {
		case d > math.Pi:
			d -= 2 * math.Pi
		case d <= -math.Pi:
			d += 2 * math.Pi
		}
		total += d
		prev = b
	}
	return math.Abs(total) > math.Pi
}

// bearing is the direction from c to q on the sphere, in radians from
// north, and false where q is c.
func bearing(c, q orb.Point) (float64, bool) {
	lat1, lat2 := radians(c[1]), radians(q[1])
	dlng := radians(q[0] - c[0])
	s := math.Sin(dlng / 2)
	x := math.Cos(lat2) * math.Sin(dlng)
	// cos lat1 sin lat2 - sin lat1 cos lat2 cos dlng, in a form that keeps
	// its precision when q is near c.
	y := math.Sin(lat2-lat1) + 2*math.Sin(lat1)*math.Cos(lat2)*s*s
	return math.Atan2(x, y), x != 0 || y != 0
}
