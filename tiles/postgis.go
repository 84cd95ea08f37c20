package tiles

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/pgq"
)

// The failures of a PostGIS backend, matched with errors.Is: the query ran
// out of time (its statement timeout, or a hung database), or the database
// could not be reached. They are the same values in packages geofence and
// tiles.
var (
	ErrTimeout     = pgq.ErrTimeout
	ErrUnavailable = pgq.ErrUnavailable
)

// PostGIS renders tiles with ST_AsMVT from the places and fences tables.
type PostGIS struct {
	db pgq.Store
	// The places query reading all places, and the one reading the places
	// drawn at low zoom (placesFrom).
	places, placesLow string
}

// NewPostGIS returns a renderer querying pool. Every tile query runs under a
// server-side statement_timeout of timeout, and is cancelled when its
// context is done.
func NewPostGIS(pool *pgxpool.Pool, timeout time.Duration) *PostGIS {
	return &PostGIS{db: pgq.NewStore(pool, timeout),
		places: placesFrom("places"), placesLow: placesFrom("places_low")}
}

// placesSQL draws the most populous places in the tile plus its margin,
// from the table %s: places, or places_low, the places at or above the
// threshold of LowPlacesZoom (migration 00014), which holds the same rows
// wherever a tile of zoom 0 to LowPlacesZoom reads them. The && on
// geom_3857 (the stored SRID) lets the table's GiST index find them; for a
// point, overlapping the margin's box is intersecting it, so no
// ST_Intersects follows (it cost 5-15% of the query), and ST_AsMVTGeom
// drops any point the index's rounded boxes let through beyond the margin.
// $1 z, $2 x, $3 y, $4 margin, $5 extent, $6 buffer, $7 minimum population,
// $8 feature cap, $9 layer name.
const placesSQL = `
WITH t AS (
    SELECT ST_TileEnvelope($1, $2, $3) AS env,
           ST_TileEnvelope($1, $2, $3, margin => $4) AS menv
), f AS (
    SELECT p.id, p.name, p.country, p.admin_code, p.feature_code, p.population,
           ST_AsMVTGeom(p.geom_3857, t.env, $5, $6, true) AS geom
    FROM %s p, t
    WHERE p.geom_3857 && t.menv AND p.population >= $7
    ORDER BY p.population DESC, p.id
    LIMIT $8
)
SELECT ST_AsMVT(f, $9, $5, 'geom', 'id') FROM f`

// placesFrom is placesSQL reading table, one of the two fixed names.
func placesFrom(table string) string { return fmt.Sprintf(placesSQL, table) }

// LowPlacesZoom is the highest zoom whose places tiles read places_low,
// the generalized places (migration 00014): its threshold (MinPopulation,
// 50,000) is the one the view was made with: 9,062 of the bundled 135,233
// places, so a tile's index scan visits a fifteenth of the rows.
const LowPlacesZoom = 5

// worldZoom is the highest zoom whose places tiles are planned for their
// values: a tile of a quarter of the world or more holds most of
// places_low, and the population index finds its few places sooner than
// the spatial one (1.0 against 2.0 ms at z0, 0.55 against 0.76 at z1;
// docs/benchmarks.md).
const worldZoom = 1

// placesQuery returns the places query of a tile at zoom z and how it is
// planned. Up to LowPlacesZoom it reads places_low and, above worldZoom,
// is planned once per connection: over places_low the spatial index then
// the threshold is the best plan whatever the tile (z3: 0.21 ms against
// 0.48 planned for its values over places, as before places_low).
func (s *PostGIS) placesQuery(z maptile.Zoom) (string, pgq.Plan) {
	switch {
	case z <= worldZoom:
		return s.placesLow, pgq.CustomPlan
	case z <= LowPlacesZoom:
		return s.placesLow, pgq.GenericPlan
	}
	return s.places, PlanFor(z)
}

// fencesSQL draws the fences of one kind whose boxes overlap the tile plus
// its margin, found through fences_geom_3857_idx, each clipped to the margin
// and simplified to simplifyUnits tile units before ST_AsMVTGeom; fences that
// vanish at this resolution are left out. Up to lowZoom the geometry comes
// from geom_3857_low, simplified in advance.
// $1 z, $2 x, $3 y, $4 margin, $5 extent, $6 buffer, $7 simplification
// tolerance in metres, $8 kind, $9 feature cap, $10 layer name, $11 lowZoom.
const fencesSQL = `
WITH t AS (
    SELECT ST_TileEnvelope($1, $2, $3) AS env,
           ST_TileEnvelope($1, $2, $3, margin => $4) AS menv
), f AS (
    SELECT c.id, c.name, c.kind, c.code,
           ST_AsMVTGeom(ST_Simplify(ST_ClipByBox2D(
               CASE WHEN $1 <= $11 THEN c.geom_3857_low ELSE c.geom_3857 END, t.menv), $7),
               t.env, $5, $6, true) AS geom
    FROM fences c, t
    WHERE c.geom_3857 && t.menv AND c.kind = $8
    ORDER BY c.id
    LIMIT $9
)
SELECT ST_AsMVT(f, $10, $5, 'geom', 'id') FROM f WHERE geom IS NOT NULL`

// Tile renders tile t of layer l as an MVT; a tile with no features is
// empty (zero bytes).
func (s *PostGIS) Tile(ctx context.Context, l Layer, t maptile.Tile) ([]byte, error) {
	if err := l.Validate(t); err != nil {
		return nil, fmt.Errorf("tiles: %s: %w", l.Name, err)
	}
	if l.kind != "" {
		return s.render(ctx, l, t, fencesSQL, PlanFor(t.Z))
	}
	sql, plan := s.placesQuery(t.Z)
	return s.render(ctx, l, t, sql, plan)
}

// render runs sql, a places query (placesSQL) or fencesSQL as l needs,
// with the arguments of tile t, planned as plan.
func (s *PostGIS) render(ctx context.Context, l Layer, t maptile.Tile, sql string, plan pgq.Plan) ([]byte, error) {
	const margin = float64(Buffer) / Extent
	args := []any{int(t.Z), int(t.X), int(t.Y), margin, Extent, Buffer,
		l.MinPopulation(int(t.Z)), l.MaxFeatures, l.Name}
	if l.kind != "" {
		args = []any{int(t.Z), int(t.X), int(t.Y), margin, Extent, Buffer,
			Tolerance(t.Z), string(l.kind), l.MaxFeatures, l.Name, lowZoom}
	}
	mvt, err := pgq.Query(ctx, s.db, plan, sql, args, func(rows pgx.Rows) ([]byte, error) {
		return pgx.CollectExactlyOneRow(rows, pgx.RowTo[[]byte])
	})
	if err != nil {
		return nil, fmt.Errorf("tiles: %s %d/%d/%d: %w", l.Name, t.Z, t.X, t.Y, err)
	}
	return mvt, nil
}

// genericZoom is the lowest zoom whose tiles are planned once (PlanFor).
const genericZoom = 4

// PlanFor is how PostgreSQL plans the query of a tile at zoom z. From
// genericZoom on a tile covers at most 1/256 of the world and the spatial
// index is the best way in whatever its other values, so the plan is made
// once per connection: planning each tile anew cost more than running it
// (0.48 ms against 0.3 ms at z10, pg_stat_statements). Below, a tile holds
// most of a continent and a filter's own index (the places' population)
// may find its few features sooner, so each tile is planned for its values.
func PlanFor(z maptile.Zoom) pgq.Plan {
	if z >= genericZoom {
		return pgq.GenericPlan
	}
	return pgq.CustomPlan
}
