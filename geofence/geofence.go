// Package geofence answers two questions about the bundled places and
// fences: which places lie within a radius of a point (nearest first), and
// which fences (countries, counties) contain a point.
//
// Two backends have the same methods: PostGIS, over the tables filled by
// package load, and Memory, over the dataset held in memory, for running
// with no database. Their answers are checked against each other by a
// differential test. Inputs are validated the same way by both; an invalid
// one is reported as a *param.Error naming the field.
//
// Sets (Set, Sets) put these questions to any source: the bundled data
// (Bundled), features held in memory such as a GeoJSON file's
// (NewFileSet), or a PostGIS table (package internal/pgsets), whose
// answers NewFileSet's match.
package geofence

import (
	"context"
	"math"

	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/param"
)

// Limits of a Within query.
const (
	// MaxRadius is the largest radius, in metres.
	MaxRadius = 100_000
	// DefaultLimit is the limit ParseWithin uses when none is given.
	DefaultLimit = 50
	// MaxLimit is the largest number of places one query returns.
	MaxLimit = 1000
)

// Backend answers the bundled sets: the method set PostGIS and Memory share.
type Backend interface {
	Within(ctx context.Context, q WithinQuery) ([]Near, error)
	Contains(ctx context.Context, q ContainsQuery) ([]dataset.Fence, error)
}

var (
	_ Backend = (*PostGIS)(nil)
	_ Backend = (*Memory)(nil)
)

// WithinQuery asks for the places within Radius metres of a point on the
// WGS84 spheroid, nearest first, at most Limit of them. Geometry asks for
// every feature's geometry: without it, only the features of a set of
// points (Set.PointsOnly, the bundled places) carry theirs.
type WithinQuery struct {
	Lng, Lat float64
	Radius   float64 // metres, in (0, MaxRadius]
	Limit    int     // in [1, MaxLimit]
	Geometry bool
}

// ContainsQuery asks for the fences that contain a point (its boundary
// included), with their geometry when Geometry is set.
type ContainsQuery struct {
	Lng, Lat float64
	Geometry bool
}

// Near is a place found by Within and its distance from the query point.
type Near struct {
	dataset.Place
	Distance float64 // metres on the WGS84 spheroid
}

// Feature returns the place as a GeoJSON feature with a "distance"
// property in metres.
func (n Near) Feature() *geojson.Feature {
	f := n.Place.Feature()
	f.Properties["distance"] = n.Distance
	return f
}

// NearCollection returns places found by Within as a FeatureCollection, in
// their order.
func NearCollection(ns []Near) *geojson.FeatureCollection {
	fc := geojson.NewFeatureCollection()
	for _, n := range ns {
		fc.Append(n.Feature())
	}
	return fc
}

// FenceCollection returns fences found by Contains as a FeatureCollection,
// in their order.
func FenceCollection(fs []dataset.Fence) *geojson.FeatureCollection {
	fc := geojson.NewFeatureCollection()
	for _, f := range fs {
		fc.Append(f.Feature())
	}
	return fc
}

// ParseWithin reads a WithinQuery from the text of request parameters, each
// number in the strict syntax of param.Float and param.Int; an empty limit
// means DefaultLimit. The result is validated.
func ParseWithin(lng, lat, radius, limit string) (WithinQuery, error) {
	var q WithinQuery
	var err error
	if q.Lng, err = param.Float("lng", lng); err != nil {
		return q, err
	}
	if q.Lat, err = param.Float("lat", lat); err != nil {
		return q, err
	}
	if q.Radius, err = param.Float("radius", radius); err != nil {
		return q, err
	}
	q.Limit = DefaultLimit
	if limit != "" {
		n, err := param.Int("limit", limit)
		if err != nil {
			return q, err
		}
		q.Limit = int(min(n, MaxLimit+1)) // Validate refuses anything above MaxLimit; no int wraps
	}
	return q, q.Validate()
}

// ParseContains reads a ContainsQuery (without geometry) from the text of
// request parameters, in the strict syntax of param.Float. The result is
// validated.
func ParseContains(lng, lat string) (ContainsQuery, error) {
	var q ContainsQuery
	var err error
	if q.Lng, err = param.Float("lng", lng); err != nil {
		return q, err
	}
	if q.Lat, err = param.Float("lat", lat); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// Validate returns a *param.Error for the first invalid field of q.
func (q WithinQuery) Validate() error {
	if err := validatePoint(q.Lng, q.Lat); err != nil {
		return err
	}
	if math.IsNaN(q.Radius) || math.IsInf(q.Radius, 0) {
		return param.Invalid("radius", "must be a finite number")
	}
	if q.Radius <= 0 || q.Radius > MaxRadius {
		return param.Invalid("radius", "must be in (0, %d] metres", MaxRadius)
	}
	if q.Limit < 1 || q.Limit > MaxLimit {
		return param.Invalid("limit", "must be in [1, %d]", MaxLimit)
	}
	return nil
}

// Validate returns a *param.Error for the first invalid field of q.
func (q ContainsQuery) Validate() error {
	return validatePoint(q.Lng, q.Lat)
}

func validatePoint(lng, lat float64) error {
	for _, c := range []struct {
		name  string
		v, to float64
	}{{"lng", lng, 180}, {"lat", lat, 90}} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) {
			return param.Invalid(c.name, "must be a finite number")
		}
		if c.v < -c.to || c.v > c.to {
			return param.Invalid(c.name, "must be in [%g, %g]", -c.to, c.to)
		}
	}
	return nil
}
