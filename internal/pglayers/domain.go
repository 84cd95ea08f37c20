package pglayers

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/pgq"
)

// srsSQL reads what spatial_ref_sys knows of SRID $1.
const srsSQL = `SELECT coalesce(proj4text, '') FROM spatial_ref_sys WHERE srid = $1`

// A projection's domain is found by transforming a grid of the Web
// Mercator world (domainStep degrees apart, latitudes clamped to the
// Mercator limit) to the SRID and back, each point on its own so that one
// PROJ refuses does not fail the others: a DO block catches each error,
// and leaves its answer in a setting of the transaction, read after it
// (a DO block takes no parameters and returns nothing). The domain is the
// union of the grid's cells whose four corners come back to themselves,
// in Web Mercator, as hex EWKB; "" when every point does.
//
// domainSetSQL passes the SRID, $1, to the block.
const (
	domainSetSQL = `SELECT set_config('pglayers.srid', $1, true)`
	domainDO     = `
DO $$
DECLARE
    srid integer := current_setting('pglayers.srid')::integer;
    step constant float8 := 5;
    cols constant integer := 73;   -- 360 / step + 1
    rows constant integer := 37;   -- 180 / step + 1
    lim constant float8 := 85.0511287798066;
    ok boolean[] := '{}';
    good boolean;
    p geometry;
    b geometry;
    dom geometry;
BEGIN
    FOR j IN 0 .. rows - 1 LOOP
        FOR i IN 0 .. cols - 1 LOOP
            p := ST_SetSRID(ST_Point(-180 + step * i, greatest(-lim, least(lim, -90 + step * j))), 4326);
            BEGIN
                b := ST_Transform(ST_Transform(p, srid), 4326);
                good := abs(ST_Y(b) - ST_Y(p)) < 1e-6
                    AND (abs(ST_X(b) - ST_X(p)) < 1e-6 OR abs(abs(ST_X(b) - ST_X(p)) - 360) < 1e-6);
            EXCEPTION WHEN OTHERS THEN  -- PROJ refused the point
                good := false;
            END;
            ok := ok || coalesce(good, false);
        END LOOP;
    END LOOP;
    IF false = ALL (ok) THEN
        PERFORM set_config('pglayers.domain', 'none', true);
    ELSIF true = ALL (ok) THEN
        PERFORM set_config('pglayers.domain', '', true);
    ELSE
        SELECT ST_Union(ST_MakeEnvelope(-180 + step * i, greatest(-lim, -90 + step * j),
                                        -180 + step * (i + 1), least(lim, -90 + step * (j + 1)), 4326))
        INTO dom
        FROM generate_series(0, cols - 2) i, generate_series(0, rows - 2) j
        WHERE ok[j * cols + i + 1] AND ok[j * cols + i + 2] AND ok[(j + 1) * cols + i + 1] AND ok[(j + 1) * cols + i + 2];
        PERFORM set_config('pglayers.domain',
            coalesce(encode(ST_AsEWKB(ST_Transform(ST_Simplify(dom, 0), 3857)), 'hex'), 'none'), true);
    END IF;
END
$$`
	domainGetSQL = `SELECT current_setting('pglayers.domain')`
)

// domain returns the part of the Web Mercator world that SRID srid can be
// transformed to and from, as EWKB in SRID 3857; nil when it is the whole
// world. Geographic SRIDs (+proj=longlat) are the whole world without
// asking.
func domain(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration, srid int32) ([]byte, error) {
	db := pgq.NewStore(pool, timeout)
	projs, err := pgq.Query(ctx, db, pgq.AutoPlan, srsSQL, []any{srid}, func(rows pgx.Rows) ([]string, error) {
		return pgx.CollectRows(rows, pgx.RowTo[string])
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("SRID %d: %w", srid, err)
	case len(projs) == 0:
		return nil, fmt.Errorf("SRID %d is not in spatial_ref_sys", srid)
	case strings.Contains(projs[0], "+proj=longlat"):
		return nil, nil
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("SRID %d: finding its domain: %w", srid, pgq.Classify(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	in := pgq.NewStore(tx, timeout)
	none := func(rows pgx.Rows) (struct{}, error) { rows.Close(); return struct{}{}, rows.Err() }
	if _, err := pgq.Query(ctx, in, pgq.AutoPlan, domainSetSQL, []any{strconv.Itoa(int(srid))}, none); err != nil {
		return nil, fmt.Errorf("SRID %d: finding its domain: %w", srid, err)
	}
	if _, err := pgq.Query(ctx, in, pgq.AutoPlan, domainDO, nil, none); err != nil {
		return nil, fmt.Errorf("SRID %d: finding its domain: %w", srid, err)
	}
	text, err := pgq.Query(ctx, in, pgq.AutoPlan, domainGetSQL, nil, func(rows pgx.Rows) (string, error) {
		return pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("SRID %d: finding its domain: %w", srid, err)
	case text == "none":
		return nil, fmt.Errorf("SRID %d: no point of the Web Mercator world is transformed to it and back", srid)
	case text == "":
		return nil, nil
	}
	b, err := hex.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("SRID %d: its domain: %w", srid, err)
	}
	return b, nil
}
