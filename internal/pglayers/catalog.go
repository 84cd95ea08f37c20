package pglayers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tileapi/tileapi/internal/pgq"
)

// relation is a table, view, materialized view, partitioned or foreign
// table, as the catalog describes it to the current role.
type relation struct {
	OID      uint32
	Schema   string
	Name     string
	Kind     string // pg_class.relkind
	Comment  string
	Role     string // current_user
	Readable bool   // the role may SELECT some column
	PK       []int16
}

// relationSQL finds a relation by name as PostgreSQL reads one (search_path,
// quotes, case), $1.
const relationSQL = `
SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS kind,
       coalesce(obj_description(c.oid, 'pg_class'), '') AS comment,
       current_user::text AS role,
       has_any_column_privilege(c.oid, 'SELECT') AS readable,
       coalesce((SELECT k.conkey FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p'), '{}') AS pk
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1)`

// Kinds of relation, pg_class.relkind.
const (
	kindTable       = "r"
	kindView        = "v"
	kindMatView     = "m"
	kindPartitioned = "p"
	kindForeign     = "f"
)

// indexable reports whether the relation may have indexes of its own.
func (r relation) indexable() bool {
	return r.Kind == kindTable || r.Kind == kindMatView || r.Kind == kindPartitioned
}

// describe returns what a relation is, in words.
func (r relation) describe() string {
	switch r.Kind {
	case kindView:
		return "view"
	case kindMatView:
		return "materialized view"
	case kindForeign:
		return "foreign table"
	}
	return "table"
}

// qualified is the relation's name for messages: schema.name, each part
// quoted where PostgreSQL would need it to read the name back.
func (r relation) qualified() string { return quoteName(r.Schema) + "." + quoteName(r.Name) }

// quoteName returns name as PostgreSQL reads it back in a qualified name
// (to_regclass): bare when it is lowercase letters, digits, _ and $ not
// starting with a digit, else quoted.
func quoteName(name string) string {
	plain := name != ""
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && (c >= '0' && c <= '9' || c == '$')) {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// lookupRelation finds the relation called name, or says why it cannot.
func lookupRelation(ctx context.Context, db pgq.Store, name string) (relation, error) {
	rs, err := pgq.Query(ctx, db, pgq.AutoPlan, relationSQL, []any{name}, pgq.Structs[relation])
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42501": // permission denied for schema
		return relation{}, fmt.Errorf("table %q: no privilege: %s (GRANT USAGE ON SCHEMA ... TO the role)", name, pgErr.Message)
	case errors.As(err, &pgErr) && (pgErr.Code == "42602" || pgErr.Code == "42601" || pgErr.Code == "42704"):
		return relation{}, fmt.Errorf("table %q: no such table or view: %s", name, pgErr.Message)
	case err != nil:
		return relation{}, fmt.Errorf("table %q: %w", name, err)
	case len(rs) == 0:
		return relation{}, fmt.Errorf("table %q: no such table or view (a mixed-case name is quoted: schema.\"Name\")", name)
	}
	r := rs[0]
	switch r.Kind {
	case kindTable, kindView, kindMatView, kindPartitioned, kindForeign:
	default:
		return relation{}, fmt.Errorf("table %q: %s is not a table or view", name, r.qualified())
	}
	if !r.Readable {
		return relation{}, fmt.Errorf("table %q: no privilege: the role %q may not SELECT from %s (GRANT SELECT ON %s TO %s)",
			name, r.Role, r.qualified(), r.qualified(), pgx.Identifier{r.Role}.Sanitize())
	}
	return r, nil
}

// column is one column of a relation.
type column struct {
	Num      int16
	Name     string
	Type     string // the type's name, a domain's base type's: int4, text, geometry
	Readable bool   // the role may SELECT it
	SRID     int32  // of a geometry or geography column; 0 when it has none
	Shape    string // of a geometry or geography column: POINT, MULTIPOLYGONZ, GEOMETRY
	Indexed  bool   // a key of a valid, whole-table GiST, SP-GiST or BRIN index
}

// columnsSQL lists the columns of relation $1 in order. A geometry
// column's SRID and type come from its typmod, or else from
// geometry_columns (which also reads the constraints of old-style
// columns).
const columnsSQL = `
SELECT a.attnum AS num, a.attname AS name, coalesce(b.typname, t.typname)::text AS type,
       has_column_privilege(a.attrelid, a.attnum, 'SELECT') AS readable,
       CASE WHEN coalesce(b.typname, t.typname) IN ('geometry', 'geography') THEN
           coalesce(nullif(postgis_typmod_srid(m.typmod), 0),
                    (SELECT g.srid FROM geometry_columns g
                     WHERE g.f_table_schema = n.nspname AND g.f_table_name = c.relname AND g.f_geometry_column = a.attname),
                    0)
       ELSE 0 END AS srid,
       CASE WHEN coalesce(b.typname, t.typname) IN ('geometry', 'geography') THEN
           CASE WHEN m.typmod < 0 THEN
               coalesce((SELECT upper(g.type) FROM geometry_columns g
                         WHERE g.f_table_schema = n.nspname AND g.f_table_name = c.relname AND g.f_geometry_column = a.attname),
                        'GEOMETRY')
           ELSE upper(postgis_typmod_type(m.typmod)) END
       ELSE '' END AS shape,
       EXISTS (SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
               WHERE i.indrelid = a.attrelid AND a.attnum = ANY (i.indkey) AND i.indisvalid AND i.indpred IS NULL
                 AND am.amname IN ('gist', 'spgist', 'brin')) AS indexed
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype
CROSS JOIN LATERAL (SELECT CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END AS typmod) m
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

// columns returns the columns of relation oid, in order.
func columns(ctx context.Context, db pgq.Store, oid uint32) ([]column, error) {
	cs, err := pgq.Query(ctx, db, pgq.AutoPlan, columnsSQL, []any{oid}, pgq.Structs[column])
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	return cs, nil
}

// Types of columns, by what a tile can make of them.
var (
	integerTypes = []string{"int2", "int4", "int8"}
	numberTypes  = []string{"int2", "int4", "int8", "float4", "float8", "numeric"}
	spatialTypes = []string{"geometry", "geography", "raster"}
)

// isGeometry reports a geometry column.
func (c column) isGeometry() bool { return c.Type == "geometry" }

// isSpatial reports a geometry, geography or raster column.
func (c column) isSpatial() bool { return slices.Contains(spatialTypes, c.Type) }

// carryable reports whether a tile can carry c as a property, as itself
// or cast to text; if not, why.
func (c column) carryable() (bool, string) {
	switch {
	case c.isSpatial():
		return false, fmt.Sprintf("is a %s column, not a property", c.Type)
	case c.Type == "bytea":
		return false, "is a bytea column: a tile's properties are numbers, booleans and strings"
	}
	return true, ""
}

// field is the TileJSON type of c as a property.
func (c column) field() string {
	switch {
	case slices.Contains(numberTypes, c.Type):
		return "Number"
	case c.Type == "bool":
		return "Boolean"
	}
	return "String"
}

// property is the expression of c as a property, on the row r: itself
// where ST_AsMVT encodes its type as a value, else cast.
func (c column) property() string {
	id := "r." + pgx.Identifier{c.Name}.Sanitize()
	switch {
	case c.Type == "numeric":
		return id + "::double precision"
	case slices.Contains(numberTypes, c.Type) || c.Type == "bool" || c.Type == "text" || c.Type == "varchar":
		return id
	}
	return id + "::text"
}

// shape returns the geometry type of a geometry column without its
// dimensions, in capitals: POINT, MULTIPOLYGON, GEOMETRY. (No type's name
// ends in Z or M.)
func (c column) shape() string {
	for _, dims := range []string{"ZM", "Z", "M"} {
		if t, ok := strings.CutSuffix(c.Shape, dims); ok {
			return t
		}
	}
	return c.Shape
}

// drawable reports whether a tile can draw c's geometry type; if not, why.
func (c column) drawable() (bool, string) {
	switch c.shape() {
	case "POINT", "MULTIPOINT", "LINESTRING", "MULTILINESTRING", "POLYGON", "MULTIPOLYGON", "GEOMETRYCOLLECTION", "GEOMETRY":
		return true, ""
	}
	return false, fmt.Sprintf("geometry column %q is of type %s: a tile draws points, lines and polygons (publish a view of ST_CurveToLine(%s) or ST_Force2D as needed)",
		c.Name, c.Shape, pgx.Identifier{c.Name}.Sanitize())
}

// points reports a column that holds only single points: they need neither
// clipping nor simplifying.
func (c column) points() bool { return c.shape() == "POINT" }

// find returns the column called name, or an error saying it is not there
// (and what it might have been meant to be).
func find(cs []column, r relation, name, what string) (column, error) {
	for _, c := range cs {
		if c.Name == name {
			if !c.Readable {
				return column{}, fmt.Errorf("%s %q: no privilege: the role %q may not SELECT column %q of %s",
					what, name, r.Role, name, r.qualified())
			}
			return c, nil
		}
	}
	for _, c := range cs {
		if strings.EqualFold(c.Name, name) {
			return column{}, fmt.Errorf("%s %q: no such column in %s %s; did you mean %q? (column names are exact)",
				what, name, r.describe(), r.qualified(), c.Name)
		}
	}
	return column{}, fmt.Errorf("%s %q: no such column in %s %s", what, name, r.describe(), r.qualified())
}
