// Package pgsets opens a PostGIS table or view named in the layers file as
// a geofence set: within over a geometry column of any type, contains over
// a polygon column, answered through the table's own GiST index on its
// stored SRID.
//
// Open reads the table's columns from the catalog and refuses, naming the
// set and what is wrong, a table that does not exist, a geometry column
// that is missing, not a geometry, of no SRID (0) or of a curved type, an
// id column that is not an integer, and a property column that is missing
// or not a scalar. Identifiers come only from the configuration, checked
// against the catalog, and are always quoted.
//
// Answers are those of plain PostGIS SQL on the same table:
//
//   - within: the rows for which ST_DWithin(ST_Transform(geom, 4326)::geography,
//     point::geography, radius) holds, nearest first by ST_Distance on
//     geography (the spheroid), ties by id, at most the limit, each with a
//     "distance" property in metres;
//   - contains: the rows for which ST_Intersects(geom, ST_Transform(point, srid))
//     holds (the boundary included), by id. A set answers contains only if
//     its column is declared POLYGON or MULTIPOLYGON: a generic geometry
//     column may hold anything, so cast or declare it to publish contains.
//
// Within prefilters with geom && the box around the point that surely
// holds the circle (geofence.WithinQuery.Bounds: split at the antimeridian,
// a band of latitude near a pole), densified and transformed to the stored
// SRID, so that the GiST index on geom serves it; latitudes are kept a
// hundred-thousandth of a degree from the poles, where some projections
// have no coordinates. Where PostGIS cannot transform the box to the
// stored SRID (part of it lies outside the projection's domain, as on a
// UTM zone's far side), within runs without the prefilter, scanning the
// table under the statement timeout; contains answers nothing there, as no
// row can hold a point its SRID has no coordinates for. The prefilter
// takes edges as stored: a geodesic edge (geography's) that bulges out of
// its ends' box, on long edges far from the equator, may be missed near it.
//
// Geometries are answered in WGS84, in two dimensions, polygons wound as
// RFC 7946 wants (winding.RightHand: exterior rings counter-clockwise,
// holes clockwise, no ring of no area). Properties are JSON scalars: numbers (integer columns as
// integers), strings (text, dates and times as ISO 8601, enums, uuids),
// booleans, and null for NULL (the property is kept, so every feature of a
// set has the same properties). The feature id is the id column's value;
// with no id column, features have none and ties are in no given order.
package pgsets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/encoding/wkb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pgq"
	"github.com/tileapi/tileapi/internal/winding"
)

// wgs84 is the SRID of longitude and latitude on WGS84.
const wgs84 = 4326

// poleMargin is how far from a pole, in degrees, the prefilter's boxes
// stop (about a metre): some projections have no coordinates for a pole.
const poleMargin = 1e-5

// segments is the number of segments the longest side of a prefilter box
// is cut into (the others into segments as long) before it is transformed
// to a projection: the box of the vertices is then that of the curved
// sides to less than a ten-thousandth of its size, within the margin
// geofence.WithinQuery.Bounds leaves around the circle.
const segments = 256

// relationSQL finds the table or view $1 as PostgreSQL reads a name
// (unquoted parts folded to lower case, the search_path for an
// unqualified one).
const relationSQL = `
SELECT c.oid, n.nspname::text AS schema, c.relname::text AS name, c.relkind::text AS kind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1)`

type relation struct {
	OID    uint32 `db:"oid"`
	Schema string `db:"schema"`
	Name   string `db:"name"`
	Kind   string `db:"kind"`
}

// relationKinds are the relkinds a set may be read from, and the others'
// names for errors.
var (
	relationKinds = map[string]bool{"r": true, "v": true, "m": true, "p": true, "f": true}
	otherKinds    = map[string]string{"i": "an index", "S": "a sequence", "c": "a composite type", "t": "a TOAST table", "I": "a partitioned index"}
)

// columnsSQL lists the columns of relation $1 (schema $2, name $3) in
// order, each with: the kind of its type, seen through domains (integer,
// number, boolean, string, geometry, or empty for any other); whether the
// role may read it; for a geometry, its declared type (upper case, as
// POINTZ) and SRID, from its type modifier or else from geometry_columns
// (which sees the constraints of old tables, but only the tables the role
// may read whole), and whether spatial_ref_sys knows the SRID; whether it
// alone is the primary key.
const columnsSQL = `
WITH RECURSIVE base (attnum, typid) AS (
  SELECT attnum, atttypid FROM pg_attribute
  WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped
  UNION ALL
  SELECT b.attnum, t.typbasetype FROM base b JOIN pg_type t ON t.oid = b.typid WHERE t.typtype = 'd'
)
SELECT a.attname::text AS name,
       format_type(a.atttypid, a.atttypmod) AS type,
       CASE
         WHEN t.oid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN 'integer'
         WHEN t.oid IN ('float4'::regtype, 'float8'::regtype, 'numeric'::regtype) THEN 'number'
         WHEN t.oid = 'bool'::regtype THEN 'boolean'
         WHEN t.typcategory IN ('S', 'D', 'T', 'E', 'I') OR t.oid = 'uuid'::regtype THEN 'string'
         WHEN t.typname = 'geometry' THEN 'geometry'
         ELSE ''
       END AS kind,
       has_column_privilege(a.attrelid, a.attnum, 'SELECT') AS readable,
       coalesce(gm.type, '') AS geometry_type,
       coalesce(gm.srid, 0) AS srid,
       EXISTS (SELECT FROM spatial_ref_sys s WHERE s.srid = gm.srid) AS known_srid,
       EXISTS (SELECT FROM pg_index i
               WHERE i.indrelid = a.attrelid AND i.indisprimary AND i.indnkeyatts = 1
                 AND i.indkey[0] = a.attnum) AS primary_key
FROM pg_attribute a
JOIN base b ON b.attnum = a.attnum
JOIN pg_type t ON t.oid = b.typid AND t.typtype <> 'd'
LEFT JOIN geometry_columns g
  ON g.f_table_schema = $2 AND g.f_table_name = $3 AND g.f_geometry_column = a.attname
LEFT JOIN LATERAL (
  SELECT coalesce(nullif(upper(postgis_typmod_type(a.atttypmod)), 'GEOMETRY'), g.type::text, 'GEOMETRY') AS type,
         coalesce(nullif(postgis_typmod_srid(a.atttypmod), 0), g.srid, 0) AS srid
  WHERE t.typname = 'geometry'
) AS gm ON true
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

type column struct {
	Name         string `db:"name"`
	Type         string `db:"type"`
	Kind         string `db:"kind"`
	Readable     bool   `db:"readable"`
	GeometryType string `db:"geometry_type"`
	SRID         int32  `db:"srid"`
	KnownSRID    bool   `db:"known_srid"`
	PrimaryKey   bool   `db:"primary_key"`
}

// fieldTypes are the geofence.Set.Fields types of the scalar kinds.
var fieldTypes = map[string]string{
	"integer": geofence.FieldNumber, "number": geofence.FieldNumber,
	"boolean": geofence.FieldBoolean, "string": geofence.FieldString,
}

// The SQL of the questions, with slots for what Open reads from the
// catalog, filled in by strings.Replacer:
//
//	{table}       the table, quoted and schema-qualified
//	{geom}        the geometry column, quoted
//	{columns}     the inner query's columns: t.{geom} AS g, t.{id} AS k (with an id), t.{property} AS p0...
//	{output}      the answer's columns (outputSQL)
//	{geography}   t.{geom} in WGS84, as geography
//	{prefilter}   the prefilter (wgs84PrefilterSQL or projectedPrefilterSQL), or nothing
//	{point}       the query point in the stored SRID
//	{order} {outer_order} {contains_order} the order by distance and id, or by distance without an id

// withinSQL finds the rows within $4 metres of the point ($1, $2) on the
// spheroid, nearest first, at most $5 of them, with their distance.
const withinSQL = `
SELECT {output}, s.d AS distance
FROM (
  SELECT {columns},
         ST_Distance({geography}, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography) AS d
  FROM {table} AS t
  WHERE {prefilter}ST_DWithin({geography}, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography, $4)
  ORDER BY {order}
  LIMIT $5
) AS s
ORDER BY {outer_order}`

// The prefilter of withinSQL, which the GiST index on {geom} serves: the
// row's box meets one of the boxes around the point ($6..$9 and $10..$13:
// west, south, east, north; the second all NULL where there is one). In a
// projected SRID ($15) the boxes are cut into segments of at most $14
// degrees, then transformed: the box of what a box becomes is then that of
// its vertices.
const (
	wgs84PrefilterSQL = `(t.{geom} && ST_MakeEnvelope($6, $7, $8, $9, 4326)
    OR t.{geom} && ST_MakeEnvelope($10, $11, $12, $13, 4326)) AND `
	projectedPrefilterSQL = `(t.{geom} && ST_Transform(ST_Segmentize(ST_MakeEnvelope($6, $7, $8, $9, 4326), $14), $15::integer)
    OR t.{geom} && ST_Transform(ST_Segmentize(ST_MakeEnvelope($10, $11, $12, $13, 4326), $14), $15::integer)) AND `
)

// containsSQL finds the rows whose geometry intersects the point ($1, $2),
// in the stored SRID ($4 where it is not WGS84's).
const containsSQL = `
SELECT {output}
FROM (
  SELECT {columns}
  FROM {table} AS t
  WHERE ST_Intersects(t.{geom}, {point})
) AS s
{contains_order}`

// outputSQL is the columns of an answer, over the inner query s: the id,
// the properties as a jsonb object, and the geometry in WGS84 and two
// dimensions, as WKB, when $3 asks for it. {id} is s.k or NULL,
// {properties} a jsonb expression, {wgs84} s.g in WGS84.
const outputSQL = `{id}::bigint AS id, {properties} AS properties,
  CASE WHEN $3::boolean THEN ST_AsBinary(ST_Force2D({wgs84})) END AS wkb`

// Open reads the table of cfg from the catalog and returns the set that
// answers from it; queries run under timeout (a server-side statement
// timeout, see pgq). Errors name the set and what is wrong with it.
func Open(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration, cfg layers.Set) (geofence.Set, error) {
	s, fields, err := open(ctx, pgq.NewStore(pool, timeout), cfg)
	if err != nil {
		return geofence.Set{}, fmt.Errorf("pgsets: set %q: %w", cfg.Name, err)
	}
	return geofence.Set{
		Name: cfg.Name, Description: cfg.Description, Fields: fields,
		Within: true, Contains: s.contains, PointsOnly: s.pointsOnly, Source: s,
	}, nil
}

// source is the geofence.SetSource of a table.
type source struct {
	name string
	db   pgq.Store
	srid int32
	// contains and pointsOnly follow the column's declared type.
	contains, pointsOnly bool
	// within is withinSQL with the prefilter; withinAll, for a projected
	// SRID, without it.
	within, withinAll, containsQuery string
}

var _ geofence.SetSource = (*source)(nil)

func open(ctx context.Context, db pgq.Store, cfg layers.Set) (*source, map[string]string, error) {
	if cfg.Table == "" {
		return nil, nil, errors.New("names no table: a table set needs its table")
	}
	rel, err := pgq.Query(ctx, db, pgq.AutoPlan, relationSQL, []any{cfg.Table}, pgq.Structs[relation])
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("table %q: %w", cfg.Table, err)
	case len(rel) == 0:
		return nil, nil, fmt.Errorf("table %q: no such table or view", cfg.Table)
	case !relationKinds[rel[0].Kind]:
		what := otherKinds[rel[0].Kind]
		if what == "" {
			what = "relkind " + rel[0].Kind
		}
		return nil, nil, fmt.Errorf("table %q is %s, not a table or view", cfg.Table, what)
	}
	r := rel[0]
	cols, err := pgq.Query(ctx, db, pgq.AutoPlan, columnsSQL, []any{r.OID, r.Schema, r.Name}, pgq.Structs[column])
	if err != nil {
		return nil, nil, fmt.Errorf("table %q: columns: %w", cfg.Table, err)
	}
	byName := make(map[string]column, len(cols))
	for _, c := range cols {
		byName[c.Name] = c
	}
	geom, err := geometryColumn(cols, byName, cfg.Geometry)
	if err != nil {
		return nil, nil, fmt.Errorf("table %q: %w", cfg.Table, err)
	}
	id, err := idColumn(cols, byName, cfg.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("table %q: %w", cfg.Table, err)
	}
	props, fields, err := properties(cols, byName, cfg.Properties, geom.Name, id)
	if err != nil {
		return nil, nil, fmt.Errorf("table %q: %w", cfg.Table, err)
	}
	gtype := baseType(geom.GeometryType)
	s := &source{
		name: cfg.Name, db: db, srid: geom.SRID,
		contains:   gtype == "POLYGON" || gtype == "MULTIPOLYGON",
		pointsOnly: gtype == "POINT",
	}
	s.within, s.withinAll, s.containsQuery = queries(pgx.Identifier{r.Schema, r.Name}.Sanitize(), geom.Name, geom.SRID, id, props)
	return s, fields, nil
}

// geometryColumn returns the column called name, or where name is empty
// the only geometry column, once it is seen to be one the set can answer
// from.
func geometryColumn(cols []column, byName map[string]column, name string) (column, error) {
	if name == "" {
		var geoms []string
		for _, c := range cols {
			if c.Kind == "geometry" {
				geoms = append(geoms, c.Name)
			}
		}
		switch len(geoms) {
		case 0:
			return column{}, errors.New("no geometry column")
		case 1:
			name = geoms[0]
		default:
			return column{}, fmt.Errorf("%d geometry columns (%s): name one with geometry", len(geoms), strings.Join(geoms, ", "))
		}
	}
	c, ok := byName[name]
	gtype := baseType(c.GeometryType)
	switch {
	case !ok:
		return c, fmt.Errorf("geometry column %q: no such column", name)
	case c.Kind != "geometry":
		return c, fmt.Errorf("geometry column %q is of type %s, not a geometry", name, c.Type)
	case !c.Readable:
		return c, fmt.Errorf("geometry column %q: the role may not read it", name)
	case c.SRID == 0:
		return c, fmt.Errorf("geometry column %q has no SRID (0): declare it, as geometry(Point, 4326), or cast the view's column so", name)
	case !c.KnownSRID:
		return c, fmt.Errorf("geometry column %q: SRID %d is not in spatial_ref_sys", name, c.SRID)
	case curved[gtype]:
		return c, fmt.Errorf("geometry column %q is of type %s: curved and surface types are not supported (convert with ST_CurveToLine)", name, gtype)
	}
	return c, nil
}

// baseType is a declared geometry type without its dimensions: POINT for
// POINTZ, POINTM and POINTZM.
func baseType(t string) string { return strings.TrimSuffix(strings.TrimSuffix(t, "M"), "Z") }

// curved are the declared types geography (and so within) cannot take.
var curved = map[string]bool{
	"CIRCULARSTRING": true, "COMPOUNDCURVE": true, "CURVEPOLYGON": true, "MULTICURVE": true,
	"MULTISURFACE": true, "POLYHEDRALSURFACE": true, "TIN": true, "TRIANGLE": true,
}

// idColumn returns the id column: the column called name, an integer, or
// where name is empty the one-column integer primary key, if any ("" for
// none).
func idColumn(cols []column, byName map[string]column, name string) (string, error) {
	if name == "" {
		for _, c := range cols {
			if c.PrimaryKey && c.Kind == "integer" && c.Readable {
				return c.Name, nil
			}
		}
		return "", nil
	}
	c, ok := byName[name]
	switch {
	case !ok:
		return "", fmt.Errorf("id column %q: no such column", name)
	case c.Kind != "integer":
		return "", fmt.Errorf("id column %q is of type %s, not an integer", name, c.Type)
	case !c.Readable:
		return "", fmt.Errorf("id column %q: the role may not read it", name)
	}
	return name, nil
}

// properties returns the property columns, and the set's Fields: the
// columns named, or where names is nil every other column of a scalar
// type the role may read (but one called geofence.DistanceProperty).
func properties(cols []column, byName map[string]column, names []string, geom, id string) ([]string, map[string]string, error) {
	if names == nil {
		for _, c := range cols {
			if fieldTypes[c.Kind] != "" && c.Readable && c.Name != geom && c.Name != id && c.Name != geofence.DistanceProperty {
				names = append(names, c.Name)
			}
		}
	}
	fields := map[string]string{geofence.DistanceProperty: geofence.FieldNumber}
	for _, n := range names {
		c, ok := byName[n]
		switch {
		case n == geofence.DistanceProperty:
			return nil, nil, fmt.Errorf("property %q: within answers give each feature's distance under that name: leave it out", n)
		case !ok:
			return nil, nil, fmt.Errorf("property %q: no such column", n)
		case fieldTypes[c.Kind] == "":
			return nil, nil, fmt.Errorf("property %q is of type %s, not a number, string, boolean, date or time", n, c.Type)
		case !c.Readable:
			return nil, nil, fmt.Errorf("property %q: the role may not read it", n)
		}
		fields[n] = fieldTypes[c.Kind]
	}
	return names, fields, nil
}

// queries fills the slots of withinSQL and containsSQL for the table: its
// within query with the prefilter and, for a projected SRID, without it,
// and its contains query.
func queries(table, geom string, srid int32, id string, props []string) (within, withinAll, contains string) {
	g := pgx.Identifier{geom}.Sanitize()
	columns := []string{"t." + g + " AS g"}
	idOut, order, outerOrder, containsOrder := "NULL", "d", "s.d", ""
	if id != "" {
		columns = append(columns, "t."+pgx.Identifier{id}.Sanitize()+" AS k")
		idOut, order, outerOrder, containsOrder = "s.k", "d, k", "s.d, s.k", "ORDER BY s.k"
	}
	propsOut := `'{}'::jsonb`
	if len(props) > 0 {
		inner := make([]string, len(props))
		for i, p := range props {
			q := pgx.Identifier{p}.Sanitize()
			columns = append(columns, "t."+q+" AS p"+strconv.Itoa(i))
			inner[i] = "s.p" + strconv.Itoa(i) + " AS " + q
		}
		propsOut = "(SELECT to_jsonb(x) FROM (SELECT " + strings.Join(inner, ", ") + ") AS x)"
	}
	geography, wgs84Out, prefilter, point := "t."+g+"::geography", "s.g", wgs84PrefilterSQL, "ST_SetSRID(ST_MakePoint($1, $2), 4326)"
	if srid != wgs84 {
		geography, wgs84Out, prefilter = "ST_Transform(t."+g+", 4326)::geography", "ST_Transform(s.g, 4326)", projectedPrefilterSQL
		point = "ST_Transform(" + point + ", $4::integer)"
	}
	output := strings.NewReplacer("{id}", idOut, "{properties}", propsOut, "{wgs84}", wgs84Out).Replace(outputSQL)
	fill := func(sql, prefilter string) string {
		return strings.NewReplacer(
			"{prefilter}", prefilter, "{output}", output, "{columns}", strings.Join(columns, ", "),
			"{table}", table, "{geography}", geography, "{order}", order, "{outer_order}", outerOrder,
			"{contains_order}", containsOrder, "{point}", point, "{geom}", g,
		).Replace(sql)
	}
	prefilter = strings.ReplaceAll(prefilter, "{geom}", g) // the replacer does not fill in what it put in
	within = fill(withinSQL, prefilter)
	if srid != wgs84 {
		withinAll = fill(withinSQL, "")
	}
	contains = fill(containsSQL, "")
	return within, withinAll, contains
}

type setRow struct {
	ID         *int64 `db:"id"`
	Properties []byte `db:"properties"`
	WKB        []byte `db:"wkb"`
}

type nearRow struct {
	setRow
	Distance float64 `db:"distance"`
}

// Within returns the rows within q.Radius metres of q's point, nearest
// first, ties by id, at most q.Limit of them.
func (s *source) Within(ctx context.Context, q geofence.WithinQuery) ([]*geojson.Feature, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgsets: set %q: within: %w", s.name, err)
	}
	args := s.withinArgs(q)
	rows, err := pgq.Query(ctx, s.db, pgq.AutoPlan, s.within, args, pgq.Structs[nearRow])
	if err != nil && s.withinAll != "" && outsideProjection(err) {
		rows, err = pgq.Query(ctx, s.db, pgq.AutoPlan, s.withinAll, args[:5], pgq.Structs[nearRow])
	}
	if err != nil {
		return nil, fmt.Errorf("pgsets: set %q: within: %w", s.name, err)
	}
	fs := make([]*geojson.Feature, len(rows))
	for i, r := range rows {
		if fs[i], err = r.feature(); err != nil {
			return nil, fmt.Errorf("pgsets: set %q: within: %w", s.name, err)
		}
		fs[i].Properties[geofence.DistanceProperty] = r.Distance
	}
	return fs, nil
}

// withinArgs returns the arguments of s.within for q; the first five are
// those of s.withinAll.
func (s *source) withinArgs(q geofence.WithinQuery) []any {
	args := []any{q.Lng, q.Lat, q.Geometry || s.pointsOnly, q.Radius, q.Limit}
	boxes := make([]any, 8) // NULLs where there is one box
	longest := 0.0
	for i, b := range q.Bounds() {
		south, north := b.Min[1], b.Max[1]
		if s.srid != wgs84 {
			south, north = max(south, -90+poleMargin), min(north, 90-poleMargin)
		}
		copy(boxes[4*i:], []any{b.Min[0], south, b.Max[0], north})
		longest = max(longest, b.Max[0]-b.Min[0], north-south)
	}
	args = append(args, boxes...)
	if s.srid != wgs84 {
		args = append(args, longest/segments, s.srid)
	}
	return args
}

// containsArgs returns the arguments of s.containsQuery for q.
func (s *source) containsArgs(q geofence.ContainsQuery) []any {
	args := []any{q.Lng, q.Lat, q.Geometry}
	if s.srid != wgs84 {
		args = append(args, s.srid)
	}
	return args
}

// Contains returns the rows whose geometry covers q's point, by id.
func (s *source) Contains(ctx context.Context, q geofence.ContainsQuery) ([]*geojson.Feature, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgsets: set %q: contains: %w", s.name, err)
	}
	if !s.contains {
		return nil, fmt.Errorf("pgsets: set %q: contains: the set's geometries are not declared polygons", s.name)
	}
	rows, err := pgq.Query(ctx, s.db, pgq.AutoPlan, s.containsQuery, s.containsArgs(q), pgq.Structs[setRow])
	if err != nil && outsideProjection(err) {
		return []*geojson.Feature{}, nil // the SRID has no coordinates for the point: no row holds it
	}
	if err != nil {
		return nil, fmt.Errorf("pgsets: set %q: contains: %w", s.name, err)
	}
	fs := make([]*geojson.Feature, len(rows))
	for i, r := range rows {
		if fs[i], err = r.feature(); err != nil {
			return nil, fmt.Errorf("pgsets: set %q: contains: %w", s.name, err)
		}
	}
	return fs, nil
}

// outsideProjection reports the error of ST_Transform given a position its
// target projection has no coordinates for.
func outsideProjection(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "XX000" && strings.HasPrefix(pgErr.Message, "transform:")
}

// feature returns the row as a GeoJSON feature.
func (r setRow) feature() (*geojson.Feature, error) {
	f := geojson.NewFeature(nil)
	if r.ID != nil {
		f.ID = *r.ID
	}
	d := json.NewDecoder(bytes.NewReader(r.Properties))
	d.UseNumber()
	if err := d.Decode(&f.Properties); err != nil {
		return nil, fmt.Errorf("feature %v: properties: %w", f.ID, err)
	}
	for k, v := range f.Properties {
		if n, ok := v.(json.Number); ok {
			f.Properties[k] = number(n)
		}
	}
	if r.WKB != nil {
		g, err := wkb.Unmarshal(r.WKB)
		if err != nil {
			return nil, fmt.Errorf("feature %v: geometry: %w", f.ID, err)
		}
		f.Geometry = winding.RightHand(g)
	}
	return f, nil
}

// number returns n as an int64 where it is an integer that fits, else as
// a float64 where it fits, else as it is (its text, which JSON keeps).
func number(n json.Number) any {
	if i, err := n.Int64(); err == nil {
		return i
	}
	if f, err := n.Float64(); err == nil {
		return f
	}
	return n
}
