package geofence

import (
	"math"

	"github.com/paulmach/orb"
)

// WGS84 ellipsoid.
const (
	wgs84A = 6378137.0
	wgs84F = 1 / 298.257223563
	// wgs84M0 is the smallest radius of curvature of the ellipsoid (the
	// meridional one at the equator): no arc of the ellipsoid is shorter
	// than this radius times its angle.
	wgs84M0 = wgs84A * (1 - wgs84F) * (1 - wgs84F)
)

func radians(deg float64) float64 { return deg * math.Pi / 180 }

// centralAngle is the great-circle angle in radians between two points on
// the unit sphere given by latitudes and longitudes in radians (haversine).
func centralAngle(lat1, lng1, lat2, lng2 float64) float64 {
	s := math.Sin((lat2-lat1)/2)*math.Sin((lat2-lat1)/2) +
		math.Cos(lat1)*math.Cos(lat2)*math.Sin((lng2-lng1)/2)*math.Sin((lng2-lng1)/2)
	return 2 * math.Asin(math.Sqrt(min(s, 1)))
}

// spheroidDistance is the geodesic distance in metres between two lon/lat
// points on the WGS84 ellipsoid, by Lambert's formula: within a metre of the
// exact geodesic up to thousands of kilometres, and within millimetres at
// the radii Within accepts.
func spheroidDistance(p, q orb.Point) float64 {
	b1 := math.Atan((1 - wgs84F) * math.Tan(radians(p[1])))
	b2 := math.Atan((1 - wgs84F) * math.Tan(radians(q[1])))
	sigma := centralAngle(b1, radians(p[0]), b2, radians(q[0]))
	if sigma == 0 {
		return 0
	}
	sinP, cosP := math.Sincos((b1 + b2) / 2)
	sinQ, cosQ := math.Sincos((b2 - b1) / 2)
	sinH, cosH := math.Sincos(sigma / 2)
	x := (sigma - math.Sin(sigma)) * sinP * sinP * cosQ * cosQ / (cosH * cosH)
	y := (sigma + math.Sin(sigma)) * cosP * cosP * sinQ * sinQ / (sinH * sinH)
	return wgs84A * (sigma - wgs84F/2*(x+y))
}

// searchBounds returns lon/lat boxes that together hold every point within
// radius metres of c: one box, or two where the circle crosses the
// antimeridian, or a whole band of latitude where it nears a pole.
func searchBounds(c orb.Point, radius float64) []orb.Bound {
	dlat := radius / wgs84M0 * 180 / math.Pi * 1.001
	south, north := max(c[1]-dlat, -90), min(c[1]+dlat, 90)
	maxLat := max(math.Abs(south), math.Abs(north))
	if maxLat >= 89.9 {
		return []orb.Bound{{Min: orb.Point{-180, south}, Max: orb.Point{180, north}}}
	}
	dlng := dlat / math.Cos(radians(maxLat))
	if dlng >= 180 {
		return []orb.Bound{{Min: orb.Point{-180, south}, Max: orb.Point{180, north}}}
	}
	west, east := c[0]-dlng, c[0]+dlng
	switch {
	case west < -180:
		return []orb.Bound{
			{Min: orb.Point{west + 360, south}, Max: orb.Point{180, north}},
			{Min: orb.Point{-180, south}, Max: orb.Point{east, north}},
		}
	case east > 180:
		return []orb.Bound{
			{Min: orb.Point{west, south}, Max: orb.Point{180, north}},
			{Min: orb.Point{-180, south}, Max: orb.Point{east - 360, north}},
		}
	}
	return []orb.Bound{{Min: orb.Point{west, south}, Max: orb.Point{east, north}}}
}
