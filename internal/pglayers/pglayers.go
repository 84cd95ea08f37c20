// Package pglayers serves PostGIS tables, views and SQL functions as tile
// layers: Open checks a layer of the layers file against the database's
// catalog and returns a tiles.Layer drawing it, and Discover lists the
// tables the database role may read as layers, with the reasons it skips
// the others.
//
// Names. A layer's table (or function) is read as PostgreSQL reads a name,
// with to_regclass (to_regprocedure): unquoted parts are lowercased and an
// unqualified name is looked up in the role's search_path, so a mixed-case
// name is quoted (`myschema."Parcels"`). Column names are taken exactly as
// the catalog spells them ("Name" is not "name"). Every identifier in the
// SQL that draws a tile comes from the catalog, quoted; no text of the
// layers file or of a request is ever part of the SQL.
//
// Table layers. The tile SQL is built once, at Open, and run with z, x, y,
// the feature cap and the filter's threshold as parameters: ST_AsMVT over
// ST_AsMVTGeom of the rows whose geometry column overlaps (&&) the tile
// plus its margin transformed to the column's own SRID, so the table's own
// spatial index finds them, and which then intersect that envelope in Web
// Mercator. Lines and polygons are clipped to the envelope in their own
// SRID before they are transformed (so that nothing near a pole or outside
// the projection's domain is transformed), then simplified to
// tiles.Tolerance of the zoom; features that vanish are left out. Rows are
// taken by the filter column, largest first, then by id (or the primary
// key), up to the layer's cap; a view or table with neither id nor key is
// taken in the order the planner finds its rows, which matters only at the
// cap.
//
// Opening a layer in a projected SRID costs about 0.2 s (its domain, see
// below); a table never analyzed has its bounds read by ST_Extent, under
// the statement timeout.
//
// Decisions, in the terms of the layers file:
//   - A geography column is refused: its index answers geography's &&,
//     not geometry's. Publish a view casting it (geog::geometry) over an
//     expression index on the same cast.
//   - A column of SRID 0 is refused with the ALTER TABLE that sets one; a
//     view whose geometry is computed (typmod lost) gets one by a cast in
//     the view: ST_Transform(geom, 4326)::geometry(Geometry, 4326).
//   - The id column is a smallint, integer or bigint (MVT ids are unsigned
//     64-bit integers); a row whose id is negative is drawn without an id.
//   - Properties of types MVT has no value for are cast to text: json,
//     jsonb (which ST_AsMVT would otherwise spread into one property per
//     key), arrays, dates, enums, anything else; numeric becomes a double.
//     bytea, geometry, geography and raster columns are never properties.
//   - A projected SRID's domain: PROJ refuses (or folds) points far from
//     a projection's area, and a low-zoom tile's envelope reaches them. At
//     Open, a 5° grid of the Web Mercator world is transformed to the SRID
//     and back, point by point; the cells whose four corners come back
//     make the domain, and each tile's envelope is clipped to it before it
//     is transformed. Geographic SRIDs (+proj=longlat) and 3857 need none.
//
// Function layers: a function (z integer, x integer, y integer, params
// jsonb) returning bytea is called with the request's declared parameters
// as params (tiles.Params.JSON); a NULL result is an empty tile.
package pglayers

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pgq"
	"github.com/tileapi/tileapi/tiles"
)

// Warning is something Open found wrong with a layer that does not stop it
// being served: a table without a spatial index, bounds it could not tell.
type Warning struct {
	Layer   string
	Message string
}

// String reads like a line of a startup log.
func (w Warning) String() string { return fmt.Sprintf("layer %q: %s", w.Layer, w.Message) }

// Open checks the table or function layer cfg against the database of pool
// and returns the layer, whose tiles are drawn by one query each under a
// statement timeout of timeout, and what it found wrong that does not stop
// the layer being served. A layer that cannot be served is an error naming
// the layer and what is wrong.
func Open(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration, cfg layers.Layer) (tiles.Layer, []Warning, error) {
	db := pgq.NewStore(pool, timeout)
	var (
		l   tiles.Layer
		ws  []string
		err error
	)
	switch cfg.Kind() {
	case layers.Table:
		l, ws, err = openTable(ctx, db, pool, timeout, cfg)
	case layers.Function:
		l, err = openFunction(ctx, db, cfg)
	default:
		err = fmt.Errorf("a %s layer is not a PostGIS table or function", cfg.Kind())
	}
	if err != nil {
		return tiles.Layer{}, nil, fmt.Errorf("pglayers: layer %q: %w", cfg.Name, err)
	}
	warnings := make([]Warning, len(ws))
	for i, w := range ws {
		warnings[i] = Warning{Layer: cfg.Name, Message: w}
	}
	return l, warnings, nil
}

// common returns the parts of a tiles.Layer that come from cfg alone.
func common(cfg layers.Layer, description string) tiles.Layer {
	minZoom, maxZoom := cfg.Zooms()
	if cfg.Description != "" {
		description = cfg.Description
	}
	return tiles.Layer{
		Name: cfg.Name, Description: description, Attribution: cfg.Attribution,
		MinZoom: minZoom, MaxZoom: maxZoom,
	}
}
