package geofence

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/planar"
	"github.com/tidwall/rtree"

	"github.com/tileapi/tileapi/internal/winding"
)

// The types of Set.Fields.
const (
	FieldNumber  = "Number"
	FieldString  = "String"
	FieldBoolean = "Boolean"
	// FieldMixed is a property of a file set holding values of more than
	// one type, or only nulls.
	FieldMixed = "Mixed"
)

// DistanceProperty is the property of every feature of a within answer:
// its distance from the query point in metres. No property of a set's own
// may have its name.
const DistanceProperty = "distance"

// NewFileSet returns a set answering within and contains over features
// held in memory, in WGS84 (a GeoJSON file's), answered as PostGIS answers
// a table set (package pgsets) over the same features:
//
//   - within: the features any part of which is within the radius of the
//     point on the spheroid (edges are great-circle arcs, as on PostGIS's
//     geography; a polygon covering the point is at distance 0), nearest
//     first, ties by id, then in the order of features;
//   - contains, only if every feature with a geometry is a Polygon or
//     MultiPolygon: the features whose polygons cover the point (edges
//     straight in longitude and latitude, the boundary included, as
//     ST_Intersects on geometry), by id, then in the order of features.
//
// A feature's id is its GeoJSON id: every feature has a number that is an
// integer (of at most 2^53), or every feature has a string, or none has one.
// properties are the properties of features that answers carry; nil for
// every property that some feature has a string, number, boolean or null
// for (but DistanceProperty). A feature with no geometry is never in an
// answer. The set is PointsOnly if every feature with a geometry is a
// Point.
//
// The features must not change afterwards; answers share their geometries,
// wound as RFC 7946 wants (exterior rings counter-clockwise, holes
// clockwise), which must not be modified. Errors name the set and the
// feature (1-based) at fault.
func NewFileSet(name, description string, features []*geojson.Feature, properties []string) (Set, error) {
	s := &fileSet{name: name, features: make([]fileFeature, 0, len(features))}
	wrap := func(format string, args ...any) error {
		return fmt.Errorf("geofence: set %q: "+format, append([]any{name}, args...)...)
	}
	fields, err := fileFields(features, properties)
	if err != nil {
		return Set{}, wrap("%w", err)
	}
	var idKind string                // "number", "string" or "none", the first feature's
	var polygons, points, others int // features of each kind of geometry
	for i, f := range features {
		if f == nil {
			return Set{}, wrap("feature %d is null", i+1)
		}
		ff := fileFeature{index: i, props: make(geojson.Properties, len(fields))}
		kind, err := ff.setID(f.ID)
		if err != nil {
			return Set{}, wrap("feature %d: id %v: %w", i+1, f.ID, err)
		}
		if idKind == "" {
			idKind = kind
		} else if kind != idKind {
			return Set{}, wrap("feature %d: its id is %s where feature 1's is %s: ids must be all integers, all strings or none", i+1, kind, idKind)
		}
		for p := range fields {
			if v, ok := f.Properties[p]; ok {
				ff.props[p] = v
			}
		}
		if f.Geometry != nil {
			if err := checkGeometry(f.Geometry); err != nil {
				return Set{}, wrap("feature %d: %w", i+1, err)
			}
			ff.geom = winding.RightHand(f.Geometry)
		}
		switch ff.geom.(type) {
		case nil:
		case orb.Polygon, orb.MultiPolygon:
			polygons++
		case orb.Point:
			points++
		default:
			others++
		}
		if ff.geom != nil && !emptyGeometry(ff.geom) {
			b := ff.geom.Bound()
			s.tree.Insert(b.Min, b.Max, int32(i))
		}
		s.features = append(s.features, ff)
	}
	s.pointsOnly = points > 0 && polygons+others == 0
	fields[DistanceProperty] = FieldNumber
	return Set{
		Name: name, Description: description, Fields: fields,
		Within: true, Contains: polygons > 0 && points+others == 0, PointsOnly: s.pointsOnly, Source: s,
	}, nil
}

// fileSet is the SetSource of NewFileSet.
type fileSet struct {
	name       string
	features   []fileFeature
	tree       rtree.RTreeGN[float64, int32] // over the bounds of the features with a geometry
	pointsOnly bool
}

var _ SetSource = (*fileSet)(nil)

// fileFeature is a feature of a file set.
type fileFeature struct {
	index int
	id    any    // int64, string or nil
	num   int64  // id, when a number
	str   string // id, when a string
	props geojson.Properties
	geom  orb.Geometry // nil for none
}

// setID records id, and returns its kind: "number", "string" or "none".
func (f *fileFeature) setID(id any) (string, error) {
	switch v := id.(type) {
	case nil:
		return "none", nil
	case string:
		f.id, f.str = v, v
		return "string", nil
	case json.Number:
		n, err := v.Int64()
		if err != nil || n > 1<<53 || n < -(1<<53) {
			return "", errors.New("must be an integer of at most 2^53 in magnitude, or a string")
		}
		f.id, f.num = n, n
		return "number", nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return "", errors.New("must be an integer of at most 2^53 in magnitude, or a string")
		}
		f.id, f.num = int64(v), int64(v)
		return "number", nil
	case int:
		return f.setID(float64(v))
	case int64:
		return f.setID(float64(v))
	}
	return "", fmt.Errorf("is a %T, not a number or a string", id)
}

func (a fileFeature) compare(b fileFeature) int {
	return cmp.Or(cmp.Compare(a.num, b.num), strings.Compare(a.str, b.str), cmp.Compare(a.index, b.index))
}

// feature returns f as GeoJSON, with its geometry if withGeometry; the
// properties are a copy, the geometry is shared.
func (f fileFeature) feature(withGeometry bool) *geojson.Feature {
	out := geojson.NewFeature(nil)
	if withGeometry && f.geom != nil {
		out.Geometry = f.geom
	}
	out.ID = f.id
	for k, v := range f.props {
		out.Properties[k] = v
	}
	return out
}

// Within returns the features within q.Radius metres of q's point, nearest
// first, ties by id, at most q.Limit of them.
func (s *fileSet) Within(ctx context.Context, q WithinQuery) ([]*geojson.Feature, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("geofence: set %q: within: %w", s.name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("geofence: set %q: within: %w", s.name, err)
	}
	type hit struct {
		i int32
		d float64
	}
	c := orb.Point{q.Lng, q.Lat}
	var hits []hit
	seen := map[int32]bool{}
	for _, b := range q.Bounds() {
		s.tree.Search(b.Min, b.Max, func(_, _ [2]float64, i int32) bool {
			if seen[i] {
				return true
			}
			seen[i] = true
			if d := geoDistance(c, s.features[i].geom); d <= q.Radius {
				hits = append(hits, hit{i, d})
			}
			return true
		})
	}
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(a.d, b.d), s.features[a.i].compare(s.features[b.i]))
	})
	hits = hits[:min(len(hits), q.Limit)]
	out := make([]*geojson.Feature, len(hits))
	for j, h := range hits {
		out[j] = s.features[h.i].feature(q.Geometry || s.pointsOnly)
		out[j].Properties[DistanceProperty] = h.d
	}
	return out, nil
}

// Contains returns the features whose polygons cover q's point, by id.
func (s *fileSet) Contains(ctx context.Context, q ContainsQuery) ([]*geojson.Feature, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("geofence: set %q: contains: %w", s.name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("geofence: set %q: contains: %w", s.name, err)
	}
	pt := orb.Point{q.Lng, q.Lat}
	var hits []int32
	s.tree.Search(pt, pt, func(_, _ [2]float64, i int32) bool {
		if planarCovers(s.features[i].geom, pt) {
			hits = append(hits, i)
		}
		return true
	})
	slices.SortFunc(hits, func(a, b int32) int { return s.features[a].compare(s.features[b]) })
	out := make([]*geojson.Feature, len(hits))
	for j, i := range hits {
		out[j] = s.features[i].feature(q.Geometry)
	}
	return out, nil
}

// planarCovers reports whether a polygon of g covers pt, its boundary
// included (a hole's too), edges straight in longitude and latitude.
func planarCovers(g orb.Geometry, pt orb.Point) bool {
	switch g := g.(type) {
	case orb.Polygon:
		if len(g) == 0 || !planar.RingContains(g[0], pt) {
			return false
		}
		for _, hole := range g[1:] {
			if planar.RingContains(hole, pt) && !onRing(hole, pt) {
				return false
			}
		}
		return true
	case orb.MultiPolygon:
		for _, p := range g {
			if planarCovers(p, pt) {
				return true
			}
		}
	}
	return false
}

// onRing reports whether pt lies on an edge of r.
func onRing(r orb.Ring, pt orb.Point) bool {
	for i := 1; i < len(r); i++ {
		a, b := r[i-1], r[i]
		if (b[0]-a[0])*(pt[1]-a[1]) == (pt[0]-a[0])*(b[1]-a[1]) &&
			min(a[0], b[0]) <= pt[0] && pt[0] <= max(a[0], b[0]) &&
			min(a[1], b[1]) <= pt[1] && pt[1] <= max(a[1], b[1]) {
			return true
		}
	}
	return false
}

// fileFields returns the type of each property of properties (every
// scalar property of features when nil), as Set.Fields has them.
func fileFields(features []*geojson.Feature, properties []string) (map[string]string, error) {
	types := map[string]map[string]bool{} // property name to the types of its values
	nonScalar := map[string]int{}         // property name to the first feature with a value of no scalar type
	for i, f := range features {
		if f == nil {
			continue // reported by NewFileSet
		}
		for k, v := range f.Properties {
			t, ok := valueType(v)
			if !ok {
				if _, seen := nonScalar[k]; !seen {
					nonScalar[k] = i + 1
				}
				continue
			}
			if types[k] == nil {
				types[k] = map[string]bool{}
			}
			if t != "" {
				types[k][t] = true
			}
		}
	}
	if properties == nil {
		for k := range types {
			if _, bad := nonScalar[k]; !bad && k != DistanceProperty {
				properties = append(properties, k)
			}
		}
	}
	fields := make(map[string]string, len(properties)+1)
	for _, p := range properties {
		switch n, bad := nonScalar[p]; {
		case p == DistanceProperty:
			return nil, fmt.Errorf("property %q: within answers give each feature's distance under that name: leave it out", p)
		case bad:
			return nil, fmt.Errorf("property %q: feature %d has a value that is not a string, number, boolean or null", p, n)
		case types[p] == nil:
			return nil, fmt.Errorf("property %q: no feature has it", p)
		}
		fields[p] = FieldMixed
		if len(types[p]) == 1 {
			for t := range types[p] {
				fields[p] = t
			}
		}
	}
	return fields, nil
}

// valueType returns the Fields type of a property's value, "" for null,
// and false for a value of no scalar type.
func valueType(v any) (string, bool) {
	switch v.(type) {
	case nil:
		return "", true
	case string:
		return FieldString, true
	case bool:
		return FieldBoolean, true
	case float64, float32, int, int64, int32, json.Number:
		return FieldNumber, true
	}
	return "", false
}

// checkGeometry reports what makes g no GeoJSON geometry in WGS84: a type
// GeoJSON does not have, a position not finite or out of range, a line of
// fewer than two positions, a ring not closed or of fewer than four.
func checkGeometry(g orb.Geometry) error {
	switch g := g.(type) {
	case orb.Point:
		return checkPosition(g)
	case orb.MultiPoint:
		return checkPositions("", g)
	case orb.LineString:
		if len(g) < 2 {
			return fmt.Errorf("a line of %d positions: it needs two or more", len(g))
		}
		return checkPositions("", g)
	case orb.MultiLineString:
		for i, ls := range g {
			if err := checkGeometry(ls); err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
		}
		return nil
	case orb.Polygon:
		for i, r := range g {
			if len(r) < 4 || r[0] != r[len(r)-1] {
				return fmt.Errorf("ring %d: %d positions, not a closed ring of four or more", i+1, len(r))
			}
			if err := checkPositions(fmt.Sprintf("ring %d: ", i+1), r); err != nil {
				return err
			}
		}
		return nil
	case orb.MultiPolygon:
		for i, p := range g {
			if err := checkGeometry(p); err != nil {
				return fmt.Errorf("polygon %d: %w", i+1, err)
			}
		}
		return nil
	case orb.Collection:
		for i, m := range g {
			if err := checkGeometry(m); err != nil {
				return fmt.Errorf("geometry %d: %w", i+1, err)
			}
		}
		return nil
	}
	return fmt.Errorf("a %T is not a GeoJSON geometry", g)
}

func checkPositions(at string, ps []orb.Point) error {
	for _, p := range ps {
		if err := checkPosition(p); err != nil {
			return fmt.Errorf("%s%w", at, err)
		}
	}
	return nil
}

func checkPosition(p orb.Point) error {
	if validatePoint(p[0], p[1]) != nil {
		return fmt.Errorf("position %v is not a longitude in [-180, 180] and a latitude in [-90, 90]", p)
	}
	return nil
}

// emptyGeometry reports whether g has no position.
func emptyGeometry(g orb.Geometry) bool {
	n := nearest{}
	n.geometry(g)
	return !n.found
}
