package geofence

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/wkb"

	"github.com/tileapi/tileapi/internal/dataset"
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

// PostGIS answers queries from the places and fences tables.
type PostGIS struct{ db pgq.Store }

// NewPostGIS returns a backend querying pool. Every query runs under a
// server-side statement_timeout of timeout, and is cancelled when its
// context is done.
func NewPostGIS(pool *pgxpool.Pool, timeout time.Duration) *PostGIS {
	return &PostGIS{db: pgq.NewStore(pool, timeout)}
}

// withinSQL filters with ST_DWithin on geography (spheroid), which the
// expression index places_geog_idx serves, and orders by the distance it
// returns, on the spheroid too, nearest first; ties go to the lower id. (KNN,
// <-> on geography, is a distance on the sphere: up to 0.3% off the
// spheroid's, enough to put places out of the order of their own distances.)
// $1 lng, $2 lat, $3 radius in metres, $4 limit.
const withinSQL = `
SELECT id, name, country, admin_code, feature_code, population,
       ST_X(geom) AS lng, ST_Y(geom) AS lat,
       ST_Distance(geom::geography, ST_MakePoint($1, $2)::geography) AS distance
FROM places
WHERE ST_DWithin(geom::geography, ST_MakePoint($1, $2)::geography, $3)
ORDER BY distance, id
LIMIT $4`

type nearRow struct {
	ID          int64   `db:"id"`
	Name        string  `db:"name"`
	Country     string  `db:"country"`
	AdminCode   string  `db:"admin_code"`
	FeatureCode string  `db:"feature_code"`
	Population  int64   `db:"population"`
	Lng         float64 `db:"lng"`
	Lat         float64 `db:"lat"`
	Distance    float64 `db:"distance"`
}

// Within returns the places within q.Radius metres of q's point, nearest
// first, at most q.Limit of them.
func (s *PostGIS) Within(ctx context.Context, q WithinQuery) ([]Near, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("geofence: within: %w", err)
	}
	rows, err := pgq.Query(ctx, s.db, pgq.AutoPlan, withinSQL, []any{q.Lng, q.Lat, q.Radius, q.Limit},
		pgq.Structs[nearRow])
	if err != nil {
		return nil, fmt.Errorf("geofence: within: %w", err)
	}
	ns := make([]Near, len(rows))
	for i, r := range rows {
		ns[i] = Near{
			Place: dataset.Place{
				ID: r.ID, Name: r.Name, Country: r.Country, AdminCode: r.AdminCode,
				FeatureCode: r.FeatureCode, Population: r.Population, Point: orb.Point{r.Lng, r.Lat},
			},
			Distance: r.Distance,
		}
	}
	return ns, nil
}

// containsSQL finds the fences whose polygons cover the point, boundary
// included, through the GiST index on geom; countries come before counties.
// Geometries are wound as RFC 7946 wants (exterior rings counter-clockwise,
// holes clockwise), whatever the table holds.
// $1 lng, $2 lat, $3 whether to return the geometry as WKB.
const containsSQL = `
SELECT kind, id, name, coalesce(code, '') AS code,
       CASE WHEN $3::boolean THEN ST_AsBinary(ST_ForcePolygonCCW(geom)) END AS wkb
FROM fences
WHERE ST_Intersects(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326))
ORDER BY kind, id`

type fenceRow struct {
	Kind dataset.Kind `db:"kind"`
	ID   int64        `db:"id"`
	Name string       `db:"name"`
	Code string       `db:"code"`
	WKB  []byte       `db:"wkb"`
}

// Contains returns the fences that contain q's point, countries first, then
// by id.
func (s *PostGIS) Contains(ctx context.Context, q ContainsQuery) ([]dataset.Fence, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("geofence: contains: %w", err)
	}
	rows, err := pgq.Query(ctx, s.db, pgq.AutoPlan, containsSQL, []any{q.Lng, q.Lat, q.Geometry},
		pgq.Structs[fenceRow])
	if err != nil {
		return nil, fmt.Errorf("geofence: contains: %w", err)
	}
	fs := make([]dataset.Fence, len(rows))
	for i, r := range rows {
		fs[i] = dataset.Fence{ID: r.ID, Kind: r.Kind, Name: r.Name, Code: r.Code}
		if r.WKB == nil {
			continue
		}
		g, err := wkb.Unmarshal(r.WKB)
		if err != nil {
			return nil, fmt.Errorf("geofence: contains: %s %d: %w", r.Kind, r.ID, err)
		}
		mp, ok := g.(orb.MultiPolygon)
		if !ok {
			return nil, fmt.Errorf("geofence: contains: %s %d: geometry is %T", r.Kind, r.ID, g)
		}
		fs[i].Geometry = mp
	}
	return fs, nil
}
