package featurefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
)

// FlatGeobuf (version 3), read as its specification and its schemas
// header.fbs and feature.fbs describe: the magic bytes, a size-prefixed
// Header table, an optional packed Hilbert R-tree (skipped), then one
// size-prefixed Feature table per feature until the end of the file.

// fgbMagic is the file's first 7 bytes; the 8th is the patch version,
// which any reader of version 3 accepts.
const fgbMagic = "fgb\x03fgb"

// isFlatGeobuf reports whether data starts with FlatGeobuf's magic bytes.
func isFlatGeobuf(data []byte) bool {
	return len(data) >= 8 && bytes.HasPrefix(data, []byte(fgbMagic))
}

// Field slots, in the order of each table's fields in the schemas.
const (
	headerGeometryType  = 2
	headerColumns       = 7
	headerFeaturesCount = 8
	headerIndexNodeSize = 9
	headerCRS           = 10

	columnName = 0
	columnType = 1

	crsOrg        = 0
	crsCode       = 1
	crsName       = 2
	crsCodeString = 5

	featureGeometry   = 0
	featureProperties = 1
	featureColumns    = 2

	geometryEnds  = 0
	geometryXY    = 1
	geometryType  = 6
	geometryParts = 7
)

// GeometryType values (as in WKB) this reader supports.
const (
	fgbUnknown         = 0
	fgbPoint           = 1
	fgbLineString      = 2
	fgbPolygon         = 3
	fgbMultiPoint      = 4
	fgbMultiLineString = 5
	fgbMultiPolygon    = 6
)

// fgbTypeNames names every GeometryType, for errors.
var fgbTypeNames = []string{"Unknown", "Point", "LineString", "Polygon", "MultiPoint",
	"MultiLineString", "MultiPolygon", "GeometryCollection", "CircularString",
	"CompoundCurve", "CurvePolygon", "MultiCurve", "MultiSurface", "Curve", "Surface",
	"PolyhedralSurface", "TIN", "Triangle"}

// ColumnType values.
const (
	colByte = iota
	colUByte
	colBool
	colShort
	colUShort
	colInt
	colUInt
	colLong
	colULong
	colFloat
	colDouble
	colString
	colJSON
	colDateTime
	colBinary
)

// column is one attribute column of the header.
type column struct {
	name string
	typ  uint8
}

// nodeItemSize is the size of one node of the packed R-tree: a bounding box
// of four doubles and a uint64 offset.
const nodeItemSize = 40

// decodeFlatGeobuf reads a whole FlatGeobuf file.
func decodeFlatGeobuf(data []byte) (*Collection, error) {
	if !isFlatGeobuf(data) {
		return nil, errors.New("not FlatGeobuf (no magic bytes fgb\\x03fgb)")
	}
	buf, rest, err := sizePrefixed(data[8:])
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	h, err := openTable(buf, 0)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if err := checkCRS(h); err != nil {
		return nil, err
	}
	geomType, err1 := h.uint8(headerGeometryType, fgbUnknown)
	count, err2 := h.uint64(headerFeaturesCount, 0)
	nodeSize, err3 := h.uint16(headerIndexNodeSize, 16)
	cols, err4 := readColumns(h)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if nodeSize > 0 && count > 0 {
		size := indexSize(count, nodeSize)
		if size > uint64(len(rest)) {
			return nil, fmt.Errorf("index of %d features runs past the end of the file", count)
		}
		rest = rest[size:]
	}

	c := &Collection{}
	for _, col := range cols {
		if t := columnFieldType(col.typ); t != "" {
			c.Fields = append(c.Fields, Field{Name: col.name, Type: t})
		}
	}
	for len(rest) > 0 {
		i := len(c.Features)
		if buf, rest, err = sizePrefixed(rest); err != nil {
			return nil, fmt.Errorf("feature %d: %w", i, err)
		}
		f, err := readFeature(buf, geomType, cols)
		if err != nil {
			return nil, fmt.Errorf("feature %d: %w", i, err)
		}
		c.Features = append(c.Features, f)
	}
	if count > 0 && uint64(len(c.Features)) != count {
		return nil, fmt.Errorf("header says %d features, file holds %d", count, len(c.Features))
	}
	return c, nil
}

// sizePrefixed splits off the flatbuffer that starts data with its uint32
// length.
func sizePrefixed(data []byte) (buf, rest []byte, err error) {
	if len(data) < 4 {
		return nil, nil, errors.New("truncated: no size prefix")
	}
	n := uint64(binary.LittleEndian.Uint32(data))
	if n >= 1<<31 || n > uint64(len(data)-4) {
		return nil, nil, fmt.Errorf("truncated: size %d runs past the end of the file", n)
	}
	return data[4 : 4+n], data[4+n:], nil
}

// indexSize is the byte size of the packed R-tree over count features with
// nodeSize children a node, as the specification's calcTreeSize computes
// it (at most 2^64-1: more than any file holds).
func indexSize(count uint64, nodeSize uint16) uint64 {
	if count > math.MaxUint32 {
		return math.MaxUint64 // the nodes' size would overflow
	}
	ns := max(uint64(nodeSize), 2)
	n, nodes := count, count
	for {
		n = (n + ns - 1) / ns
		nodes += n
		if n == 1 {
			break
		}
	}
	return nodes * nodeItemSize
}

// checkCRS refuses a header whose CRS is not WGS84 longitude/latitude:
// EPSG:4326 (an absent org means EPSG) or OGC:CRS84.
func checkCRS(h table) error {
	crs, ok, err := h.table(headerCRS)
	if err != nil {
		return fmt.Errorf("header: crs: %w", err)
	}
	if !ok {
		return errors.New("no CRS in the header: want EPSG:4326 (longitude, latitude)")
	}
	org, err1 := crs.bytes(crsOrg)
	code, err2 := crs.int32(crsCode, 0)
	codeString, err3 := crs.bytes(crsCodeString)
	name, err4 := crs.bytes(crsName)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("header: crs: %w", err)
	}
	o := strings.ToUpper(string(org))
	if o == "" {
		o = "EPSG"
	}
	id := string(codeString)
	if code != 0 {
		id = fmt.Sprint(code)
	}
	if (o == "EPSG" && id == "4326") || (o == "OGC" && strings.EqualFold(id, "CRS84")) {
		return nil
	}
	desc := o + ":" + id
	if id == "" || id == "0" {
		desc = "with no code"
	}
	if len(name) > 0 {
		desc += fmt.Sprintf(" %q", strings.ToValidUTF8(string(name), "\uFFFD"))
	}
	return fmt.Errorf("CRS %s is not EPSG:4326: reproject to longitude/latitude, e.g. ogr2ogr -t_srs EPSG:4326", desc)
}

// readColumns reads the header's column schema.
func readColumns(t table) ([]column, error) {
	ts, err := t.tables(headerColumns)
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	cols := make([]column, len(ts))
	for i, ct := range ts {
		name, err1 := ct.bytes(columnName)
		typ, err2 := ct.uint8(columnType, colByte)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("column %d: %w", i, err)
		}
		if typ > colBinary {
			return nil, fmt.Errorf("column %d: unknown column type %d", i, typ)
		}
		cols[i] = column{name: strings.ToValidUTF8(string(name), "\uFFFD"), typ: typ}
	}
	return cols, nil
}

// columnFieldType is the TileJSON field type of a column type; "" for
// Binary columns, whose values are not kept.
func columnFieldType(typ uint8) string {
	switch typ {
	case colBool:
		return "Boolean"
	case colString, colJSON, colDateTime:
		return "String"
	case colBinary:
		return ""
	}
	return "Number"
}

// readFeature reads one Feature table; geomType is the header's geometry
// type, Unknown when each feature gives its own.
func readFeature(buf []byte, geomType uint8, cols []column) (*geojson.Feature, error) {
	t, err := openTable(buf, 0)
	if err != nil {
		return nil, err
	}
	if _, ok, err := t.field(featureColumns, 4); ok || err != nil {
		return nil, errors.New("per-feature column schemas are not supported")
	}
	g, ok, err := t.table(featureGeometry)
	if err != nil {
		return nil, fmt.Errorf("geometry: %w", err)
	}
	if !ok {
		return nil, errors.New("no geometry")
	}
	geom, err := readGeometry(g, geomType)
	if err != nil {
		return nil, err
	}
	raw, err := t.bytes(featureProperties)
	if err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	props, err := readProperties(raw, cols)
	if err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	f := geojson.NewFeature(geom)
	f.Properties = props
	return f, nil
}

// readGeometry reads a Geometry table of type typ, or of its own type when
// typ is Unknown.
func readGeometry(g table, typ uint8) (orb.Geometry, error) {
	if typ == fgbUnknown {
		var err error
		if typ, err = g.uint8(geometryType, fgbUnknown); err != nil {
			return nil, fmt.Errorf("geometry: %w", err)
		}
	}
	if typ == fgbMultiPolygon {
		parts, err := g.tables(geometryParts)
		if err != nil {
			return nil, fmt.Errorf("geometry: %w", err)
		}
		mp := make(orb.MultiPolygon, len(parts))
		for i, part := range parts {
			p, err := readGeometry(part, fgbPolygon)
			if err != nil {
				return nil, fmt.Errorf("polygon %d: %w", i, err)
			}
			mp[i] = p.(orb.Polygon)
		}
		return mp, nil
	}
	xy, err1 := g.float64s(geometryXY)
	ends, err2 := g.uint32s(geometryEnds)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("geometry: %w", err)
	}
	if len(xy)%2 != 0 {
		return nil, fmt.Errorf("geometry: odd number of xy values (%d)", len(xy))
	}
	pts := make([]orb.Point, len(xy)/2)
	for i := range pts {
		pts[i] = orb.Point{xy[2*i], xy[2*i+1]}
	}
	switch typ {
	case fgbPoint:
		if len(pts) != 1 {
			return nil, fmt.Errorf("point has %d positions, want 1", len(pts))
		}
		return pts[0], nil
	case fgbMultiPoint:
		return orb.MultiPoint(pts), nil
	case fgbLineString:
		return orb.LineString(pts), nil
	case fgbMultiLineString, fgbPolygon:
		lines, err := split(pts, ends)
		if err != nil {
			return nil, err
		}
		if typ == fgbPolygon {
			p := make(orb.Polygon, len(lines))
			for i, l := range lines {
				p[i] = orb.Ring(l)
			}
			return p, nil
		}
		return orb.MultiLineString(lines), nil
	}
	if int(typ) < len(fgbTypeNames) {
		return nil, fmt.Errorf("unsupported geometry type %s", fgbTypeNames[typ])
	}
	return nil, fmt.Errorf("unknown geometry type %d", typ)
}

// split cuts pts at ends, the index one past the last position of each part
// (no ends: one part).
func split(pts []orb.Point, ends []uint32) ([]orb.LineString, error) {
	if len(ends) == 0 {
		return []orb.LineString{pts}, nil
	}
	lines := make([]orb.LineString, len(ends))
	start := uint32(0)
	for i, end := range ends {
		if end <= start || uint64(end) > uint64(len(pts)) {
			return nil, fmt.Errorf("geometry: part end %d out of order or past the %d positions", end, len(pts))
		}
		lines[i] = pts[start:end:end]
		start = end
	}
	if int(start) != len(pts) {
		return nil, fmt.Errorf("geometry: parts end at position %d of %d", start, len(pts))
	}
	return lines, nil
}

// fixedSize is the byte size of each fixed-size column type's values.
var fixedSize = [...]int{colByte: 1, colUByte: 1, colBool: 1, colShort: 2, colUShort: 2,
	colInt: 4, colUInt: 4, colLong: 8, colULong: 8, colFloat: 4, colDouble: 8}

// readProperties reads a feature's properties buffer: pairs of a uint16
// column index and the value, encoded as the column's type says.
func readProperties(b []byte, cols []column) (geojson.Properties, error) {
	props := geojson.Properties{}
	le := binary.LittleEndian
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, errCorrupt
		}
		i := int(le.Uint16(b))
		b = b[2:]
		if i >= len(cols) {
			return nil, fmt.Errorf("column %d of %d", i, len(cols))
		}
		col := cols[i]
		size := uint64(0)
		if int(col.typ) < len(fixedSize) {
			size = uint64(fixedSize[col.typ])
		} else if len(b) >= 4 {
			size = 4 + uint64(le.Uint32(b)) // length-prefixed
		}
		if size == 0 || size > uint64(len(b)) {
			return nil, fmt.Errorf("column %q: value runs past the end of the properties", col.name)
		}
		n := int(size)
		var v any
		switch col.typ {
		case colBool:
			v = b[0] != 0
		case colByte:
			v = int64(int8(b[0]))
		case colUByte:
			v = int64(b[0])
		case colShort:
			v = int64(int16(le.Uint16(b)))
		case colUShort:
			v = int64(le.Uint16(b))
		case colInt:
			v = int64(int32(le.Uint32(b)))
		case colUInt:
			v = int64(le.Uint32(b))
		case colLong:
			v = int64(le.Uint64(b))
		case colULong:
			v = unsigned(le.Uint64(b))
		case colFloat:
			v = finite(float64(math.Float32frombits(le.Uint32(b))))
		case colDouble:
			v = finite(math.Float64frombits(le.Uint64(b)))
		case colString, colJSON, colDateTime:
			v = strings.ToValidUTF8(string(b[4:n]), "\uFFFD")
		}
		if v != nil {
			props[col.name] = v
		}
		b = b[n:]
	}
	return props, nil
}

// unsigned is u as an int64 when it fits, as a uint64 otherwise.
func unsigned(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return u
}

// finite is f, or nil (no value) when f is NaN or infinite, which neither
// GeoJSON nor JSON can carry.
func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return f
}
