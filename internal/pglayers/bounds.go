package pglayers

import (
	"context"
	"errors"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/tileapi/tileapi/internal/pgq"
)

// maxLat is the latitude limit of Web Mercator.
const maxLat = 85.0511287798066

// The bounds of a table in degrees: its extent in its SRID, segmentized so
// that the box's image is covered, transformed to 4326. estimatedExtentSQL
// reads the planner's statistics ($1 schema, $2 table, $3 column, $4
// SRID): no rows when there are none yet. extentSQL reads the table ($1
// SRID; {table} and {geom} are quoted identifiers).
const (
	estimatedExtentSQL = `
SELECT ST_XMin(b) AS west, ST_YMin(b) AS south, ST_XMax(b) AS east, ST_YMax(b) AS north
FROM (SELECT ST_Transform(ST_Segmentize(g, greatest(ST_XMax(g) - ST_XMin(g), ST_YMax(g) - ST_YMin(g), 1e-9) / 32), 4326)::box2d AS b
      FROM (SELECT ST_SetSRID(ST_EstimatedExtent($1, $2, $3)::geometry, $4) AS g) e
      WHERE g IS NOT NULL) x`
	extentSQL = `
SELECT ST_XMin(b) AS west, ST_YMin(b) AS south, ST_XMax(b) AS east, ST_YMax(b) AS north
FROM (SELECT ST_Transform(ST_Segmentize(g, greatest(ST_XMax(g) - ST_XMin(g), ST_YMax(g) - ST_YMin(g), 1e-9) / 32), 4326)::box2d AS b
      FROM (SELECT ST_SetSRID(ST_Extent(r.{geom})::geometry, $1) AS g FROM {table} AS r) e
      WHERE g IS NOT NULL) x`
)

// box is a bounding box in degrees.
type box struct{ West, South, East, North float64 }

// bounds returns the area tb covers, [west, south, east, north] within Web
// Mercator's world; the zero value (the world) where it cannot tell, with
// a warning saying why. A view is the world: its extent could cost a scan
// of its tables.
func bounds(ctx context.Context, db pgq.Store, tb table) ([4]float64, string) {
	if !tb.rel.indexable() {
		return [4]float64{}, ""
	}
	collect := pgq.Structs[box]
	bs, err := pgq.Query(ctx, db, pgq.AutoPlan, estimatedExtentSQL,
		[]any{tb.rel.Schema, tb.rel.Name, tb.geom.Name, tb.geom.SRID}, collect)
	failed := err != nil && !errors.Is(err, pgq.ErrTimeout) && !errors.Is(err, pgq.ErrUnavailable)
	if failed || err == nil && len(bs) == 0 {
		// No statistics yet (a table never analyzed), or a name that
		// ST_EstimatedExtent cannot read (one with a double quote): read
		// the table, under the statement timeout.
		sql := replaceAll(extentSQL, map[string]string{
			"{table}": pgx.Identifier{tb.rel.Schema, tb.rel.Name}.Sanitize(),
			"{geom}":  pgx.Identifier{tb.geom.Name}.Sanitize(),
		})
		bs, err = pgq.Query(ctx, db, pgq.AutoPlan, sql, []any{tb.geom.SRID}, collect)
	}
	switch {
	case errors.Is(err, pgq.ErrTimeout):
		return [4]float64{}, "bounds: reading the table's extent took too long; ANALYZE it so its statistics tell: " + err.Error()
	case err != nil:
		return [4]float64{}, "bounds: " + err.Error()
	case len(bs) == 0:
		return [4]float64{}, "" // an empty table
	}
	b := bs[0]
	west, east := max(b.West, -180), min(b.East, 180)
	south, north := max(b.South, -maxLat), min(b.North, maxLat)
	if west > east || south > north {
		return [4]float64{}, "bounds: the table's extent is outside Web Mercator's world"
	}
	// The estimate is in single precision: rounded outward to a micro-
	// degree (about 11 cm), it reads as written and still covers the rows,
	// within the world.
	down := func(v, limit float64) float64 { return max(math.Floor(v*1e6)/1e6, limit) }
	up := func(v, limit float64) float64 { return min(math.Ceil(v*1e6)/1e6, limit) }
	return [4]float64{down(west, -180), down(south, -maxLat), up(east, 180), up(north, maxLat)}, ""
}
