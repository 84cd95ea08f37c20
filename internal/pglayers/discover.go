package pglayers

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pgq"
)

// Skipped is a table (or view) Discover did not publish, and why.
type Skipped struct {
	// Table is its name as a layers file names it: schema.table, quoted
	// where needed.
	Table string
	// Reason says what is wrong, naming the column, and how to fix it.
	Reason string
}

// String reads like a line of `tileapi layers`.
func (s Skipped) String() string { return s.Table + ": " + s.Reason }

// bundledTables are tileapi's own tables (see migrations/): places and
// fences hold the bundled data, served as the bundled layers; the others
// are bookkeeping with no geometry, listed so that none is ever published.
// They are skipped in a schema where tileapi's migrations ran (one holding
// goose's goose_db_version).
var bundledTables = []string{
	"places", "fences", "api_keys", "data_version", "quota_ledger", "quota_ledger_batches", "goose_db_version",
}

// candidatesSQL lists every relation with a geometry or geography column
// that the role may SELECT from, in schemas it may use, but PostgreSQL's
// own schemas, the objects of extensions (PostGIS' spatial_ref_sys,
// topology and tiger) and partitions (their partitioned table is
// published).
const candidatesSQL = `
SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS kind,
       coalesce(obj_description(c.oid, 'pg_class'), '') AS comment,
       current_user::text AS role, true AS readable,
       coalesce((SELECT k.conkey FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p'), '{}') AS pk,
       EXISTS (SELECT 1 FROM pg_class g WHERE g.relnamespace = n.oid AND g.relname = 'goose_db_version') AS migrated
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND NOT c.relispartition
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT')
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
                  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
  AND EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
              LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                AND coalesce(b.typname, t.typname) IN ('geometry', 'geography'))
ORDER BY n.nspname COLLATE "C", c.relname COLLATE "C"`

// candidate is a row of candidatesSQL.
type candidate struct {
	relation
	Migrated bool
}

// Discover lists, as layers, every geometry column of every table, view
// and materialized view that the role of pool may SELECT from, in name
// order: named schema_table (schema_table_column where a table has
// several), lowercased, other characters than a-z, 0-9, _ and - made _,
// and numbered _2, _3... where two names would be one; zooms 0 to 22;
// every property a tile can carry; the id from a one-column integer
// primary key. It skips, with the reason, geometry columns without an
// SRID, without a spatial index, of a type a tile cannot draw, and
// geography columns. pg_tileserv serves a table without an index; a
// metered server must not let one tile scan a table. A view has no index
// of its own, and is published: the planner uses its tables' indexes.
func Discover(ctx context.Context, pool *pgxpool.Pool) (found []layers.Layer, skipped []Skipped, err error) {
	db := pgq.NewStore(pool, discoverTimeout)
	cands, err := pgq.Query(ctx, db, pgq.AutoPlan, candidatesSQL, nil, pgq.Structs[candidate])
	if err != nil {
		return nil, nil, fmt.Errorf("pglayers: discover: %w", err)
	}
	taken := map[string]bool{}
	minZoom, maxZoom := 0, layers.MaxZoom
	for _, c := range cands {
		rel := c.relation
		if c.Migrated && slices.Contains(bundledTables, rel.Name) {
			skipped = append(skipped, Skipped{Table: rel.qualified(), Reason: "tileapi's own table: its data is served as the bundled layers"})
			continue
		}
		cs, err := columns(ctx, db, rel.OID)
		if err != nil {
			return nil, nil, fmt.Errorf("pglayers: discover: %s: %w", rel.qualified(), err)
		}
		var geoms []column
		for _, col := range cs {
			if col.isGeometry() || col.Type == "geography" {
				geoms = append(geoms, col)
			}
		}
		for _, g := range geoms {
			if why := unpublishable(rel, g); why != "" {
				skipped = append(skipped, Skipped{Table: rel.qualified(), Reason: why})
				continue
			}
			name := rel.Schema + "_" + rel.Name
			if len(geoms) > 1 {
				name += "_" + g.Name
			}
			l := layers.Layer{
				Name: uniqueName(layerName(name), taken), Table: rel.qualified(), Geometry: g.Name,
				MinZoom: &minZoom, MaxZoom: &maxZoom,
			}
			if pk := primaryKey(rel, cs); len(pk) == 1 && slices.Contains(integerTypes, pk[0].Type) {
				l.ID = pk[0].Name
			}
			l.Properties = []string{}
			for _, col := range cs {
				if ok, _ := col.carryable(); ok && col.Name != l.ID {
					l.Properties = append(l.Properties, col.Name)
				}
			}
			found = append(found, l)
		}
	}
	return found, skipped, nil
}

// discoverTimeout bounds each catalog query of Discover.
const discoverTimeout = 30 * time.Second

// unpublishable says why discovery skips geometry column g, or "".
func unpublishable(rel relation, g column) string {
	switch {
	case g.Type == "geography":
		return geographyError(g).Error()
	case g.SRID == 0:
		return noSRID(rel, g).Error()
	case rel.Kind == kindForeign:
		return fmt.Sprintf("geometry %q: a foreign table has no index of its own: tiles would fetch the whole table; name it in the layers file to serve it anyway", g.Name)
	case rel.indexable() && !g.Indexed:
		return noIndex(rel, g)
	}
	if ok, why := g.drawable(); !ok {
		return why
	}
	return ""
}

// unnamed is what layerName replaces in a name.
var unnamed = regexp.MustCompile(`[^a-z0-9_-]+`)

// maxName is the longest layer name.
const maxName = 63

// layerName makes s a layer name: lowercase, other characters than a-z,
// 0-9, _ and - made _, starting with a letter or digit, 63 bytes at most.
func layerName(s string) string {
	s = strings.TrimLeft(unnamed.ReplaceAllString(strings.ToLower(s), "_"), "_-")
	if s == "" {
		s = "layer"
	}
	return s[:min(len(s), maxName)]
}

// uniqueName returns name, or name_2, name_3... (shortened to fit), the
// first not in taken, and takes it.
func uniqueName(name string, taken map[string]bool) string {
	n := name
	for i := 2; taken[n]; i++ {
		suffix := "_" + strconv.Itoa(i)
		n = name[:min(len(name), maxName-len(suffix))] + suffix
	}
	taken[n] = true
	return n
}
