// Package featurefile reads a GeoJSON or FlatGeobuf file into memory as orb
// features, for tileapi's embedded mode: an operator's own data files served
// as tile layers and geofence sets without PostGIS.
//
// What a Collection holds, whichever the format:
//
//   - Coordinates are WGS84 longitude/latitude, every one finite and within
//     [-180, 180] x [-90, 90]. GeoJSON is RFC 7946, so WGS84 (a legacy
//     "crs" member naming another CRS is refused); a FlatGeobuf file must
//     say EPSG:4326 (or OGC:CRS84) in its header, and any other CRS, none
//     or an unknown one is refused. Z and M values are dropped.
//   - Geometries are Point, MultiPoint, LineString, MultiLineString, Polygon
//     and MultiPolygon; a feature without a geometry, a GeometryCollection
//     or a curve is refused. Lines have 2 positions or more, polygon rings
//     4 or more and are closed.
//   - Polygons are kept as read: rings are not rewound to any winding
//     order, since the renderer orients them itself.
//   - Properties keep string, number and boolean values; null (and NaN or
//     infinite numbers) leave the property out of that feature. Numbers are
//     int64 when integral (a GeoJSON number written without a fraction or
//     exponent, or a FlatGeobuf integer column) and within int64, uint64 for
//     larger unsigned FlatGeobuf values, float64 otherwise. A GeoJSON object
//     or array value is kept as its compact JSON text, and so are FlatGeobuf
//     Json columns; DateTime columns are kept as their ISO 8601 text;
//     Binary columns are dropped.
//   - The feature id is the GeoJSON feature's "id" when it is a string or a
//     number (a number as a property number is); otherwise, and for every
//     FlatGeobuf feature, it is nil.
//
// Errors name the file and, for a bad feature, its index (0-based) in the
// file.
package featurefile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
)

// Collection is the whole content of one file.
type Collection struct {
	// Features in file order, each with a valid geometry.
	Features []*geojson.Feature
	// Fields are the properties' names and types: for GeoJSON in order of
	// first appearance, typed by their values; for FlatGeobuf the header's
	// columns in order, typed by the column types.
	Fields []Field
	// Bounds covers every feature's geometry.
	Bounds orb.Bound
	// GeometryType is the features' GeoJSON geometry type ("Point",
	// "LineString", "Polygon", "MultiPolygon", ...) when they all share
	// one, "Geometry" when they are mixed.
	GeometryType string
}

// Field is one property of a Collection's features.
type Field struct {
	// Name is the property's key.
	Name string
	// Type is the TileJSON field type: "String", "Number" or "Boolean".
	// A GeoJSON property whose values differ in type across features is a
	// "String", each of its values kept as its JSON text.
	Type string
}

// Load reads the GeoJSON (.geojson, .json) or FlatGeobuf (.fgb) file at
// path. A file that starts with FlatGeobuf's magic bytes is read as
// FlatGeobuf whatever its name, one that starts with '{' as GeoJSON. A
// GeoJSON file holds a FeatureCollection, a single Feature or a bare
// geometry (one feature without properties).
func Load(path string) (*Collection, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("featurefile: %w", err)
	}
	c, err := decode(data, strings.ToLower(filepath.Ext(path)))
	if err != nil {
		return nil, fmt.Errorf("featurefile: %s: %w", path, err)
	}
	return c, nil
}

// decode reads a file's content, of extension ext, as Load says.
func decode(data []byte, ext string) (*Collection, error) {
	var c *Collection
	var err error
	switch {
	case isFlatGeobuf(data) || ext == ".fgb":
		c, err = decodeFlatGeobuf(data)
	case ext == ".geojson" || ext == ".json" || bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")):
		c, err = decodeGeoJSON(data)
	default:
		err = errors.New("neither GeoJSON (.geojson, .json) nor FlatGeobuf (.fgb)")
	}
	if err == nil {
		err = c.finish()
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// finish validates every geometry and sets Bounds and GeometryType.
func (c *Collection) finish() error {
	if len(c.Features) == 0 {
		return errors.New("no features")
	}
	for i, f := range c.Features {
		if err := validate(f.Geometry); err != nil {
			return fmt.Errorf("feature %d: %s: %w", i, f.Geometry.GeoJSONType(), err)
		}
		b, t := f.Geometry.Bound(), f.Geometry.GeoJSONType()
		if i == 0 {
			c.Bounds, c.GeometryType = b, t
			continue
		}
		c.Bounds = c.Bounds.Union(b)
		if t != c.GeometryType {
			c.GeometryType = "Geometry"
		}
	}
	return nil
}

// validate checks g's structure and that its coordinates are finite
// longitudes and latitudes.
func validate(g orb.Geometry) error {
	switch g := g.(type) {
	case orb.Point:
		if math.IsNaN(g[0]) || math.IsNaN(g[1]) || math.IsInf(g[0], 0) || math.IsInf(g[1], 0) {
			return fmt.Errorf("%v is not finite", g)
		}
		if g[0] < -180 || g[0] > 180 || g[1] < -90 || g[1] > 90 {
			return fmt.Errorf("%v is not a longitude in [-180, 180] and a latitude in [-90, 90]", g)
		}
		return nil
	case orb.MultiPoint:
		return each("point", g, 1)
	case orb.LineString:
		return each("position", g, 2)
	case orb.MultiLineString:
		return each("line", g, 1)
	case orb.Ring:
		if len(g) > 0 && g[0] != g[len(g)-1] {
			return fmt.Errorf("ring is not closed (first position %v, last %v)", g[0], g[len(g)-1])
		}
		return each("position", g, 4)
	case orb.Polygon:
		return each("ring", g, 1)
	case orb.MultiPolygon:
		return each("polygon", g, 1)
	}
	return fmt.Errorf("unsupported geometry %T", g)
}

// each checks that parts has at least min elements and validates each.
func each[S ~[]E, E orb.Geometry](what string, parts S, min int) error {
	if len(parts) < min {
		return fmt.Errorf("%d %ss, want %d or more", len(parts), what, min)
	}
	for i, p := range parts {
		if err := validate(p); err != nil {
			return fmt.Errorf("%s %d: %w", what, i, err)
		}
	}
	return nil
}
