package pglayers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pgq"
	"github.com/tileapi/tileapi/tiles"
)

// webMercator is the SRID tiles are drawn in.
const webMercator = 3857

// mercatorWorld is the width of the Web Mercator world in metres, 2π times
// WGS84's semi-major axis: ST_TileEnvelope's bounds.
const mercatorWorld = 2 * math.Pi * 6378137

// segments is how many pieces each side of a tile's envelope is cut into
// before it is transformed to a projected SRID, so that the envelope's
// curved image is covered by the bounding box of its vertices.
const segments = 64

// table is a table layer's configuration checked against the catalog.
type table struct {
	rel        relation
	geom       column
	id         *column
	properties []column
	filter     *column
	order      []column // after the filter, the rows' order: the id or the primary key
	domain     []byte   // where the SRID can be transformed, in Web Mercator; nil: everywhere
}

// openTable opens the table layer cfg.
func openTable(ctx context.Context, db pgq.Store, pool *pgxpool.Pool, timeout time.Duration, cfg layers.Layer) (tiles.Layer, []string, error) {
	rel, err := lookupRelation(ctx, db, cfg.Table)
	if err != nil {
		return tiles.Layer{}, nil, err
	}
	cs, err := columns(ctx, db, rel.OID)
	if err != nil {
		return tiles.Layer{}, nil, fmt.Errorf("table %s: %w", rel.qualified(), err)
	}
	tb, err := resolve(rel, cs, cfg)
	if err != nil {
		return tiles.Layer{}, nil, fmt.Errorf("table %s: %w", rel.qualified(), err)
	}
	var warnings []string
	switch {
	case rel.Kind == kindForeign:
		warnings = append(warnings, fmt.Sprintf("%s is a foreign table: every tile asks its server for the rows in the tile", rel.qualified()))
	case rel.indexable() && !tb.geom.Indexed:
		warnings = append(warnings, noIndex(rel, tb.geom))
	}
	if tb.geom.SRID != webMercator {
		if tb.domain, err = domain(ctx, pool, timeout, tb.geom.SRID); err != nil {
			return tiles.Layer{}, nil, fmt.Errorf("table %s: geometry column %q: %w", rel.qualified(), tb.geom.Name, err)
		}
	}
	l := common(cfg, rel.Comment)
	l.MaxFeatures = cfg.Features()
	l.Fields = make(map[string]string, len(tb.properties))
	for _, p := range tb.properties {
		l.Fields[p.Name] = p.field()
	}
	var warning string
	if l.Bounds, warning = bounds(ctx, db, tb); warning != "" {
		warnings = append(warnings, warning)
	}
	l.Source = tb.source(db, cfg)
	return l, warnings, nil
}

// noIndex is the warning, and discovery's reason to skip, for a geometry
// column without a spatial index.
func noIndex(rel relation, geom column) string {
	return fmt.Sprintf("no spatial index on %q: tiles would scan the whole table; CREATE INDEX ON %s USING gist (%s)",
		geom.Name, pgx.Identifier{rel.Schema, rel.Name}.Sanitize(), pgx.Identifier{geom.Name}.Sanitize())
}

// resolve checks cfg's columns against cs, filling in the defaults.
func resolve(rel relation, cs []column, cfg layers.Layer) (table, error) {
	tb := table{rel: rel}
	var err error
	if tb.geom, err = geometry(rel, cs, cfg.Geometry); err != nil {
		return table{}, err
	}
	if cfg.ID != "" {
		id, err := find(cs, rel, cfg.ID, "id")
		if err != nil {
			return table{}, err
		}
		if !slices.Contains(integerTypes, id.Type) {
			return table{}, fmt.Errorf("id %q is a %s column: a feature id is an unsigned 64-bit integer, from a smallint, integer or bigint column", id.Name, id.Type)
		}
		tb.id = &id
	} else if pk := primaryKey(rel, cs); len(pk) == 1 && slices.Contains(integerTypes, pk[0].Type) {
		tb.id = &pk[0]
	}
	if cfg.Properties != nil {
		for _, name := range cfg.Properties {
			p, err := find(cs, rel, name, "property")
			if err != nil {
				return table{}, err
			}
			if ok, why := p.carryable(); !ok {
				return table{}, fmt.Errorf("property %q %s", name, why)
			}
			tb.properties = append(tb.properties, p)
		}
	} else {
		for _, c := range cs {
			if ok, _ := c.carryable(); ok && c.Readable && (tb.id == nil || c.Num != tb.id.Num) {
				tb.properties = append(tb.properties, c)
			}
		}
	}
	if f := cfg.Filter; f != nil {
		c, err := find(cs, rel, f.Column, "filter column")
		if err != nil {
			return table{}, err
		}
		if !slices.Contains(numberTypes, c.Type) {
			return table{}, fmt.Errorf("filter column %q is a %s column: min_by_zoom compares numbers", c.Name, c.Type)
		}
		tb.filter = &c
	}
	if tb.id != nil {
		tb.order = []column{*tb.id}
	} else if pk := primaryKey(rel, cs); len(pk) > 0 && !slices.ContainsFunc(pk, func(c column) bool { return !c.Readable }) {
		tb.order = pk
	}
	return tb, nil
}

// geometry returns the geometry column called name, or the relation's
// only one where name is "".
func geometry(rel relation, cs []column, name string) (column, error) {
	var g column
	if name != "" {
		c, err := find(cs, rel, name, "geometry")
		if err != nil {
			return column{}, err
		}
		g = c
	} else {
		var names []string
		for _, c := range cs {
			if c.isGeometry() && c.Readable {
				g = c
				names = append(names, strconv.Quote(c.Name))
			}
		}
		switch len(names) {
		case 0:
			for _, c := range cs {
				if c.Type == "geography" {
					return column{}, geographyError(c)
				}
			}
			return column{}, fmt.Errorf("%s %s has no geometry column the role may read", rel.describe(), rel.qualified())
		case 1:
		default:
			return column{}, fmt.Errorf("%s %s has several geometry columns (%s): name the one to draw as the layer's geometry",
				rel.describe(), rel.qualified(), strings.Join(names, ", "))
		}
	}
	switch {
	case g.Type == "geography":
		return column{}, geographyError(g)
	case !g.isGeometry():
		return column{}, fmt.Errorf("geometry %q is a %s column, not a geometry", g.Name, g.Type)
	case g.SRID == 0:
		return column{}, noSRID(rel, g)
	}
	if ok, why := g.drawable(); !ok {
		return column{}, errors.New(why)
	}
	return g, nil
}

// geographyError refuses a geography column, saying how to serve it.
func geographyError(c column) error {
	return fmt.Errorf("geometry %q is a geography column: tiles are drawn from geometry; publish a view of %s::geometry AS geom over an index USING gist ((%s::geometry))",
		c.Name, pgx.Identifier{c.Name}.Sanitize(), pgx.Identifier{c.Name}.Sanitize())
}

// noSRID is the error, and discovery's reason to skip, for a geometry
// column of SRID 0.
func noSRID(rel relation, g column) error {
	col := pgx.Identifier{g.Name}.Sanitize()
	shape := typeNames[g.shape()]
	if shape == "" {
		shape = "Geometry"
	}
	if rel.Kind == kindView {
		return fmt.Errorf("geometry %q has no SRID (0): cast it in the view, e.g. ST_SetSRID(%s, 4326)::geometry(%s, 4326) AS %s",
			g.Name, col, shape, col)
	}
	return fmt.Errorf("geometry %q has no SRID (0): set the SRID its coordinates are in, e.g. ALTER TABLE %s ALTER COLUMN %s TYPE geometry(%s, 4326) USING ST_SetSRID(%s, 4326)",
		g.Name, pgx.Identifier{rel.Schema, rel.Name}.Sanitize(), col, shape, col)
}

// typeNames spell the geometry types as PostGIS' documentation does.
var typeNames = map[string]string{
	"POINT": "Point", "MULTIPOINT": "MultiPoint", "LINESTRING": "LineString", "MULTILINESTRING": "MultiLineString",
	"POLYGON": "Polygon", "MULTIPOLYGON": "MultiPolygon", "GEOMETRYCOLLECTION": "GeometryCollection",
}

// primaryKey returns the columns of the relation's primary key, in order.
func primaryKey(rel relation, cs []column) []column {
	var pk []column
	for _, n := range rel.PK {
		for _, c := range cs {
			if c.Num == n {
				pk = append(pk, c)
			}
		}
	}
	return pk
}

// tableSQL draws a tile of a table layer; see the package comment. Its
// {box}, {merc}, {draw}, {where}, {idcolumn} and {idarg} are fragments
// chosen by the layer (below), then its @params are numbered (number), and
// last its other {markers} are replaced by identifiers, quoted: no name is
// ever read as SQL or as a parameter.
//
// The rows are found by && on the stored SRID, which the column's own
// index answers, and kept where they intersect the tile plus its margin
// in Web Mercator, transformed once (the LATERAL subquery, kept apart by
// OFFSET 0), so the cap counts only features of the tile.
const tableSQL = `
WITH t AS (
    SELECT ST_TileEnvelope(@z, @x, @y) AS env,
           ST_TileEnvelope(@z, @x, @y, margin => @margin) AS menv
), s AS (
    SELECT {box} AS box FROM t
), f AS (
    SELECT {idcolumn}{columns}ST_AsMVTGeom({draw}, t.env, @extent, @buffer, true) AS {geomname}
    FROM {table} AS r
    CROSS JOIN t
    CROSS JOIN s
    CROSS JOIN LATERAL (SELECT {merc} AS g OFFSET 0) AS m
    WHERE r.{geom} && s.box AND ST_Intersects(m.g, t.menv){where}{order}
    LIMIT @limit
)
SELECT ST_AsMVT(f, @name, @extent, @geomname{idarg}) FROM f WHERE {geomname} IS NOT NULL`

// The fragments of tableSQL.
const (
	// The tile's envelope plus margin, where the rows are looked for: as it
	// is in Web Mercator; within the world (the margin spills past the
	// antimeridian, where a transform would wrap it round the world)
	// transformed to the column's SRID; or clipped to the SRID's domain
	// first.
	boxMercator = `t.menv`
	boxWorld    = `ST_Transform(ST_Segmentize(ST_ClipByBox2D(t.menv, ST_TileEnvelope(0, 0, 0)), @segment), @srid::integer)`
	boxDomain   = `ST_Transform(ST_Segmentize(ST_ClipByBox2D(ST_GeomFromEWKB(@domain), t.menv), @segment), @srid::integer)`
	// A row's geometry in Web Mercator: points as they are; lines and
	// polygons clipped to the box in their own SRID first.
	mercPoints            = `r.{geom}`
	mercShapes            = `ST_ClipByBox2D(r.{geom}, t.menv)`
	mercPointsTransformed = `ST_Transform(r.{geom}, 3857)`
	mercShapesTransformed = `ST_Transform(ST_ClipByBox2D(r.{geom}, s.box), 3857)`
	// What ST_AsMVTGeom draws: points, or lines and polygons simplified.
	drawPoints = `m.g`
	drawShapes = `ST_Simplify(m.g, @tolerance)`
	// The zoom's least value of the filter column, whole or not.
	filterInteger = ` AND r.{filter} >= @threshold::bigint`
	filterNumber  = ` AND r.{filter} >= @threshold::double precision`
	// The feature id: MVT's is unsigned, and a negative one is left out.
	idColumn = `CASE WHEN r.{id} >= 0 THEN r.{id} END AS {idname}, `
)

// source returns the tile source of the table layer.
func (tb table) source(db pgq.Store, cfg layers.Layer) *tableSource {
	transformed := tb.geom.SRID != webMercator
	fragments := map[string]string{
		"{box}": boxMercator, "{merc}": mercShapes, "{draw}": drawShapes,
		"{where}": "", "{idcolumn}": "", "{idarg}": "",
	}
	switch {
	case transformed && tb.domain != nil:
		fragments["{box}"] = boxDomain
	case transformed:
		fragments["{box}"] = boxWorld
	}
	switch {
	case tb.geom.points() && transformed:
		fragments["{merc}"], fragments["{draw}"] = mercPointsTransformed, drawPoints
	case tb.geom.points():
		fragments["{merc}"], fragments["{draw}"] = mercPoints, drawPoints
	case transformed:
		fragments["{merc}"] = mercShapesTransformed
	}
	if tb.id != nil {
		fragments["{idcolumn}"], fragments["{idarg}"] = idColumn, ", @idname"
	}
	var order []string
	s := &tableSource{
		db: db, name: cfg.Name, maxFeatures: cfg.Features(), filter: cfg.Filter, srid: tb.geom.SRID, domain: tb.domain,
	}
	if tb.filter != nil {
		fragments["{where}"] = filterNumber
		if slices.Contains(integerTypes, tb.filter.Type) {
			fragments["{where}"], s.integerFilter = filterInteger, true
		}
		order = append(order, "r."+pgx.Identifier{tb.filter.Name}.Sanitize()+" DESC")
	}
	for _, c := range tb.order {
		order = append(order, "r."+pgx.Identifier{c.Name}.Sanitize())
	}
	names := make([]string, 0, len(tb.properties))
	var cols strings.Builder
	for _, p := range tb.properties {
		names = append(names, p.Name)
		fmt.Fprintf(&cols, "%s AS %s, ", p.property(), pgx.Identifier{p.Name}.Sanitize())
	}
	s.geomName, s.idName = unused("__geom", names), unused("__id", names)
	sql, slots := number(replaceAll(tableSQL, fragments))
	s.slots = slots
	idents := map[string]string{
		"{table}":    pgx.Identifier{tb.rel.Schema, tb.rel.Name}.Sanitize(),
		"{geom}":     pgx.Identifier{tb.geom.Name}.Sanitize(),
		"{geomname}": pgx.Identifier{s.geomName}.Sanitize(),
		"{idname}":   pgx.Identifier{s.idName}.Sanitize(),
		"{columns}":  cols.String(),
		"{order}":    "",
	}
	if len(order) > 0 {
		idents["{order}"] = "\n    ORDER BY " + strings.Join(order, ", ")
	}
	if tb.id != nil {
		idents["{id}"] = pgx.Identifier{tb.id.Name}.Sanitize()
	}
	if tb.filter != nil {
		idents["{filter}"] = pgx.Identifier{tb.filter.Name}.Sanitize()
	}
	s.sql = replaceAll(sql, idents)
	return s
}

// replaceAll replaces every key of m in s by its value, in one pass: a
// value is never searched for keys.
func replaceAll(s string, m map[string]string) string {
	pairs := make([]string, 0, 2*len(m))
	for k, v := range m {
		pairs = append(pairs, k, v)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// unused returns name, with underscores after it as needed to differ from
// every one of taken.
func unused(name string, taken []string) string {
	for slices.Contains(taken, name) {
		name += "_"
	}
	return name
}

// slot is a parameter of a tile's query, filled in by Tile.
type slot string

// param matches the @params of tableSQL's fragments.
var param = regexp.MustCompile(`@[a-z]+`)

// number replaces each @param of sql by $n, the same n for the same
// param, and returns the params in the order of their numbers.
func number(sql string) (string, []slot) {
	var slots []slot
	sql = param.ReplaceAllStringFunc(sql, func(p string) string {
		s := slot(p[1:])
		i := slices.Index(slots, s)
		if i < 0 {
			slots = append(slots, s)
			i = len(slots) - 1
		}
		return "$" + strconv.Itoa(i+1)
	})
	return sql, slots
}

// tableSource draws the tiles of a table layer.
type tableSource struct {
	db          pgq.Store
	sql         string
	slots       []slot
	name        string
	maxFeatures int
	filter      *layers.Filter
	// integerFilter says the filter column is an integer: its threshold
	// is rounded up, which keeps the meaning of >=.
	integerFilter bool
	srid          int32
	domain        []byte
	geomName      string
	idName        string
}

var _ tiles.Source = (*tableSource)(nil)

// Tile draws tile t; a tile with no features is empty (zero bytes).
func (s *tableSource) Tile(ctx context.Context, t maptile.Tile, _ tiles.Params) ([]byte, error) {
	args := make([]any, len(s.slots))
	for i, sl := range s.slots {
		v, ok := s.value(sl, t)
		if !ok {
			return nil, fmt.Errorf("pglayers: %s: no value for parameter @%s", s.name, sl)
		}
		args[i] = v
	}
	b, err := pgq.Query(ctx, s.db, tiles.PlanFor(t.Z), s.sql, args, func(rows pgx.Rows) ([]byte, error) {
		return pgx.CollectExactlyOneRow(rows, pgx.RowTo[[]byte])
	})
	if err != nil {
		return nil, fmt.Errorf("pglayers: %s %d/%d/%d: %w", s.name, t.Z, t.X, t.Y, err)
	}
	return b, nil
}

// value is the value of slot sl for tile t, and false for a slot it does
// not know.
func (s *tableSource) value(sl slot, t maptile.Tile) (any, bool) {
	switch sl {
	case "z":
		return int(t.Z), true
	case "x":
		return int(t.X), true
	case "y":
		return int(t.Y), true
	case "margin":
		return float64(tiles.Buffer) / tiles.Extent, true
	case "extent":
		return tiles.Extent, true
	case "buffer":
		return tiles.Buffer, true
	case "tolerance":
		return tiles.Tolerance(t.Z), true
	case "segment":
		return mercatorWorld / math.Exp2(float64(t.Z)) / segments, true
	case "srid":
		return s.srid, true
	case "domain":
		return s.domain, true
	case "limit":
		return s.maxFeatures, true
	case "name":
		return s.name, true
	case "geomname":
		return s.geomName, true
	case "idname":
		return s.idName, true
	case "threshold":
		v, _ := s.filter.Min(int(t.Z))
		if s.integerFilter {
			// Clamped: a bigint holds no more, and >= keeps its meaning.
			return int64(max(min(math.Ceil(v), math.MaxInt64/2), math.MinInt64/2)), true
		}
		return v, true
	}
	return nil, false
}
