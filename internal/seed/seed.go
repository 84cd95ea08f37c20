// Package seed copies the bundled dataset into the PostGIS tables created by
// package migrations.
package seed

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/encoding/wkb"
	"github.com/schollz/progressbar/v3"

	"github.com/tileapi/tileapi/internal/dataset"
)

// Counts is how many rows of each kind a load wrote.
type Counts struct {
	Places, Countries, Counties int
}

// String reads like "135233 places, 241 countries, 3231 counties".
func (c Counts) String() string {
	return fmt.Sprintf("%d places, %d countries, %d counties", c.Places, c.Countries, c.Counties)
}

// The rows are copied into temporary tables, then replace the tables'
// contents in the same transaction: readers see the old rows or the new ones,
// and loading twice leaves the same rows as loading once. The places drawn
// at low zoom (places_low, migration 00014) are refreshed in it too, under
// the same new data version.
const (
	createStagingSQL = `
CREATE TEMP TABLE places_load (
    id bigint, name text, country text, admin_code text, feature_code text,
    population bigint, lon float8, lat float8
) ON COMMIT DROP;
CREATE TEMP TABLE fences_load (kind text, id bigint, name text, code text, wkb bytea) ON COMMIT DROP`

	replaceSQL = `
TRUNCATE places, fences;
INSERT INTO places (id, name, country, admin_code, feature_code, population, geom)
SELECT id, name, country, admin_code, feature_code, population, ST_SetSRID(ST_MakePoint(lon, lat), 4326)
FROM places_load;
INSERT INTO fences (kind, id, name, code, geom)
SELECT kind, id, name, NULLIF(code, ''), ST_Multi(ST_GeomFromWKB(wkb, 4326))
FROM fences_load;
REFRESH MATERIALIZED VIEW places_low;
INSERT INTO data_version (version, loaded_at)
VALUES (md5(random()::text || clock_timestamp()::text), now())
ON CONFLICT (id) DO UPDATE SET version = excluded.version, loaded_at = excluded.loaded_at;
ANALYZE places;
ANALYZE places_low;
ANALYZE fences`

	versionSQL = `SELECT version FROM data_version`

	// renewSQL draws a new version as a load does, leaving loaded_at alone.
	renewSQL = `UPDATE data_version SET version = md5(random()::text || clock_timestamp()::text)`
)

var (
	// ErrNotLoaded reports a database into which no data has been loaded.
	ErrNotLoaded = errors.New("load: no data loaded: run tileapi load")
	// ErrNotMigrated reports a database without tileapi's schema.
	ErrNotMigrated = errors.New("load: the database has no tileapi schema: run tileapi migrate && tileapi load")
)

// undefinedTable is PostgreSQL's SQLSTATE for a relation that does not
// exist.
const undefinedTable = "42P01"

// Version returns the version of the data last loaded: a new one each load.
func Version(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var v string
	err := pool.QueryRow(ctx, versionSQL).Scan(&v)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", ErrNotLoaded
	case errors.As(err, &pgErr) && pgErr.Code == undefinedTable:
		return "", ErrNotMigrated
	case err != nil:
		return "", fmt.Errorf("load: version: %w", err)
	}
	return v, nil
}

// Renew gives the loaded data a new version without reloading it, so servers
// started afterwards key their tile caches anew: no tile cached under the old
// version is served by them. The load tool renews the version before each
// run, so that a tile cached in Redis by an earlier run is not taken for a
// miss. It returns ErrNotLoaded if nothing was loaded.
func Renew(ctx context.Context, pool *pgxpool.Pool) error {
	tag, err := pool.Exec(ctx, renewSQL)
	if err != nil {
		return fmt.Errorf("load: renew: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotLoaded
	}
	return nil
}

// Dataset replaces the rows of the places and fences tables with d in one
// transaction, using COPY. When progress is not nil, a progress bar of the
// rows copied is drawn on it; pass a terminal, not a log.
func Dataset(ctx context.Context, pool *pgxpool.Pool, d *dataset.Dataset, progress io.Writer) (Counts, error) {
	var c Counts
	for _, f := range d.Fences {
		switch f.Kind {
		case dataset.Country:
			c.Countries++
		case dataset.County:
			c.Counties++
		}
	}
	c.Places = len(d.Places)
	bar := newBar(progress, len(d.Places)+len(d.Fences))

	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, createStagingSQL); err != nil {
			return fmt.Errorf("create staging tables: %w", err)
		}
		places := pgx.CopyFromSlice(len(d.Places), func(i int) ([]any, error) {
			p := d.Places[i]
			bar.Add(1)
			return []any{p.ID, p.Name, p.Country, p.AdminCode, p.FeatureCode, p.Population, p.Point[0], p.Point[1]}, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"places_load"},
			[]string{"id", "name", "country", "admin_code", "feature_code", "population", "lon", "lat"}, places); err != nil {
			return fmt.Errorf("copy places: %w", err)
		}
		fences := pgx.CopyFromSlice(len(d.Fences), func(i int) ([]any, error) {
			f := d.Fences[i]
			b, err := wkb.Marshal(f.Geometry)
			if err != nil {
				return nil, fmt.Errorf("%s %d: %w", f.Kind, f.ID, err)
			}
			bar.Add(1)
			return []any{string(f.Kind), f.ID, f.Name, f.Code, b}, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"fences_load"},
			[]string{"kind", "id", "name", "code", "wkb"}, fences); err != nil {
			return fmt.Errorf("copy fences: %w", err)
		}
		if _, err := tx.Exec(ctx, replaceSQL); err != nil {
			return fmt.Errorf("replace rows: %w", err)
		}
		return nil
	})
	bar.Finish()
	if err != nil {
		return Counts{}, fmt.Errorf("load: %w", err)
	}
	return c, nil
}

func newBar(w io.Writer, total int) *progressbar.ProgressBar {
	if w == nil {
		return progressbar.DefaultSilent(int64(total))
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("copying rows"),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}
