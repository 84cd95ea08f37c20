package geofence

import (
	"math"

	"github.com/paulmach/orb"
)

// WGS84 ellipsoid.
const (
	wgs84A = 6378137.0
	wgs84F = 1 / 298.257223563
	wgs84B = wgs84A * (1 - wgs84F)
	// wgs84M0 is the smallest radius of curvature of the ellipsoid (the
	// meridional one at the equator): no arc of the ellipsoid is shorter
	// than this radius times its angle.
	wgs84M0 = wgs84A * (1 - wgs84F) * (1 - wgs84F)
)

func radians(deg float64) float64 { return deg * math.Pi / 180 }

func degrees(rad float64) float64 { return rad * 180 / math.Pi }

// centralAngle is the great-circle angle in radians between two points on
// the unit sphere given by latitudes and longitudes in radians (haversine).
func centralAngle(lat1, lng1, lat2, lng2 float64) float64 {
	s := math.Sin((lat2-lat1)/2)*math.Sin((lat2-lat1)/2) +
		math.Cos(lat1)*math.Cos(lat2)*math.Sin((lng2-lng1)/2)*math.Sin((lng2-lng1)/2)
	return 2 * math.Asin(math.Sqrt(min(s, 1)))
}

// spheroidDistance is the geodesic distance in metres between two lon/lat
// points on the WGS84 ellipsoid, by Vincenty's inverse formula: within a
// millionth of PostGIS's (GeographicLib's) at the radii Within accepts, and
// within a tenth of a millimetre at any distance it converges for. Nearly
// antipodal points, where it does not converge, take Lambert's formula,
// within a few tenths of a percent there: far beyond any radius Within
// accepts.
func spheroidDistance(p, q orb.Point) float64 {
	if d, ok := vincenty(p, q); ok {
		return d
	}
	return lambert(p, q)
}

// vincenty is Vincenty's inverse formula (1975), and false where its
// iteration does not converge.
func vincenty(p, q orb.Point) (float64, bool) {
	u1 := math.Atan((1 - wgs84F) * math.Tan(radians(p[1])))
	u2 := math.Atan((1 - wgs84F) * math.Tan(radians(q[1])))
	sinU1, cosU1 := math.Sincos(u1)
	sinU2, cosU2 := math.Sincos(u2)
	l := radians(q[0] - p[0])
	lambda := l
	for range 100 {
		sinL, cosL := math.Sincos(lambda)
		sinSigma := math.Hypot(cosU2*sinL, cosU1*sinU2-sinU1*cosU2*cosL)
		if sinSigma == 0 {
			return 0, true // the same point
		}
		cosSigma := sinU1*sinU2 + cosU1*cosU2*cosL
		sigma := math.Atan2(sinSigma, cosSigma)
		sinAlpha := cosU1 * cosU2 * sinL / sinSigma
		cos2Alpha := 1 - sinAlpha*sinAlpha
		cos2SigmaM := 0.0 // on the equator
		if cos2Alpha != 0 {
			cos2SigmaM = cosSigma - 2*sinU1*sinU2/cos2Alpha
		}
		c := wgs84F / 16 * cos2Alpha * (4 + wgs84F*(4-3*cos2Alpha))
		prev := lambda
		lambda = l + (1-c)*wgs84F*sinAlpha*
			(sigma+c*sinSigma*(cos2SigmaM+c*cosSigma*(-1+2*cos2SigmaM*cos2SigmaM)))
		if math.Abs(lambda-prev) < 1e-13 {
			u := cos2Alpha * (wgs84A*wgs84A - wgs84B*wgs84B) / (wgs84B * wgs84B)
			a := 1 + u/16384*(4096+u*(-768+u*(320-175*u)))
			b := u / 1024 * (256 + u*(-128+u*(74-47*u)))
			dSigma := b * sinSigma * (cos2SigmaM + b/4*(cosSigma*(-1+2*cos2SigmaM*cos2SigmaM)-
				b/6*cos2SigmaM*(-3+4*sinSigma*sinSigma)*(-3+4*cos2SigmaM*cos2SigmaM)))
			return wgs84B * a * (sigma - dSigma), true
		}
	}
	return 0, false
}

// lambert is Lambert's formula for the geodesic distance: within a metre of
// the exact geodesic up to thousands of kilometres.
func lambert(p, q orb.Point) float64 {
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

// Bounds returns lon/lat boxes that together hold every point within
// q.Radius metres of q's point on the spheroid: one box, or two where the
// circle crosses the antimeridian (one each side), or a whole band of
// latitude where it nears a pole. A source prefilters its features with
// them (an R-tree, a GiST index) before measuring exact distances.
func (q WithinQuery) Bounds() []orb.Bound {
	dlat := degrees(q.Radius/wgs84M0) * 1.001
	south, north := max(q.Lat-dlat, -90), min(q.Lat+dlat, 90)
	maxLat := max(math.Abs(south), math.Abs(north))
	if maxLat >= 89.9 {
		return []orb.Bound{{Min: orb.Point{-180, south}, Max: orb.Point{180, north}}}
	}
	dlng := dlat / math.Cos(radians(maxLat))
	if dlng >= 180 {
		return []orb.Bound{{Min: orb.Point{-180, south}, Max: orb.Point{180, north}}}
	}
	west, east := q.Lng-dlng, q.Lng+dlng
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
