package usage

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres reads the usage history from the usage_hourly and usage_daily
// tables (migrations/00011_usage_history.sql, 00013_usage_overage.sql), which internal/ledger
// writes, and rolls the hours past the retention up into days.
type Postgres struct {
	pool *pgxpool.Pool
}

// NewPostgres returns a Postgres over pool, whose database has the
// migrations applied.
func NewPostgres(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool} }

// usageSQL selects the rows of [$1, $2) of a key ($3, 0 for any) and a
// customer ($4, 0 for any): the hours, and with $5 the days rolled up,
// summed per identity and bucket (%[1]s: the start of the hour or day),
// route (%[2]s) and layer (%[3]s), the fragments of grouping below.
const usageSQL = `WITH u AS (
  SELECT identity, key_id, customer_id, hour AS start, route, layer, requests, units_charged,
         units_given_back, units_unmetered, units_overage, refused_429, refused_422
  FROM usage_hourly
  WHERE hour >= $1 AND hour < $2 AND ($3 = 0 OR key_id = $3) AND ($4 = 0 OR customer_id = $4)
  UNION ALL
  SELECT identity, key_id, customer_id, day::timestamp AT TIME ZONE 'UTC', route, layer, requests, units_charged,
         units_given_back, units_unmetered, units_overage, refused_429, refused_422
  FROM usage_daily
  WHERE $5 AND day >= ($1 AT TIME ZONE 'UTC')::date AND day < ($2 AT TIME ZONE 'UTC')::date
    AND ($3 = 0 OR key_id = $3) AND ($4 = 0 OR customer_id = $4)
)
SELECT identity, coalesce(key_id, 0), coalesce(customer_id, 0), %[1]s, %[2]s, %[3]s,
       sum(requests)::bigint, sum(units_charged)::bigint, sum(units_given_back)::bigint,
       sum(units_unmetered)::bigint, sum(units_overage)::bigint, sum(refused_429)::bigint, sum(refused_422)::bigint
FROM u
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 4, 1, 5, 6`

// The fragments of usageSQL, from this fixed set only.
var (
	startBy = map[string]string{ByHour: "start", ByDay: "date_trunc('day', start, 'UTC')"}
	routeBy = map[string]string{GroupNone: "''", GroupRoute: "route", GroupLayer: "route"}
	layerBy = map[string]string{GroupNone: "''", GroupRoute: "''", GroupLayer: "layer"}
)

// Usage returns the rows q selects. By hour it reads the hours kept; by
// day, those summed per day with the days rolled up.
func (p *Postgres) Usage(ctx context.Context, q Query) ([]Row, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	sql := fmt.Sprintf(usageSQL, startBy[q.By], routeBy[q.Group], layerBy[q.Group])
	rows, err := p.pool.Query(ctx, sql, q.From, q.To, q.KeyID, q.CustomerID, q.By == ByDay)
	if err != nil {
		return nil, fmt.Errorf("usage: read: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Row, error) {
		var r Row
		err := row.Scan(&r.Identity, &r.KeyID, &r.CustomerID, &r.Start, &r.Route, &r.Layer,
			&r.Requests, &r.Charged, &r.GivenBack, &r.Unmetered, &r.Overage, &r.Refused429, &r.Refused422)
		r.Start = r.Start.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("usage: read: %w", err)
	}
	return out, nil
}

// rollupSQL moves the hours before $1 into the days they are in, in one
// statement: a row is counted in one table or the other, never both.
const rollupSQL = `WITH gone AS (DELETE FROM usage_hourly WHERE hour < $1 RETURNING *)
INSERT INTO usage_daily AS d (identity, key_id, customer_id, day, route, layer, requests, units_charged,
                              units_given_back, units_unmetered, units_overage, refused_429, refused_422)
SELECT identity, key_id, customer_id, (hour AT TIME ZONE 'UTC')::date, route, layer, sum(requests), sum(units_charged),
       sum(units_given_back), sum(units_unmetered), sum(units_overage), sum(refused_429), sum(refused_422)
FROM gone
GROUP BY identity, key_id, customer_id, (hour AT TIME ZONE 'UTC')::date, route, layer
ON CONFLICT (identity, day, route, layer) DO UPDATE SET
  requests = d.requests + EXCLUDED.requests,
  units_charged = d.units_charged + EXCLUDED.units_charged,
  units_given_back = d.units_given_back + EXCLUDED.units_given_back,
  units_unmetered = d.units_unmetered + EXCLUDED.units_unmetered,
  units_overage = d.units_overage + EXCLUDED.units_overage,
  refused_429 = d.refused_429 + EXCLUDED.refused_429,
  refused_422 = d.refused_422 + EXCLUDED.refused_422`

// Rollup moves the hours of the days before the one before - retention
// into usage_daily and returns how many day rows it wrote: whole UTC days
// only, so a day is never split between the tables. Hours written later
// to a rolled-up day are added to it at the next rollup.
func (p *Postgres) Rollup(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	cutoff := now.UTC().Add(-retention).Truncate(24 * time.Hour)
	tag, err := p.pool.Exec(ctx, rollupSQL, cutoff)
	if err != nil {
		return 0, fmt.Errorf("usage: rollup: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Run rolls up the hours past retention at once and then hourly, until
// ctx is done, logging a failure to log.
func (p *Postgres) Run(ctx context.Context, retention time.Duration, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if _, err := p.Rollup(ctx, time.Now(), retention); err != nil && ctx.Err() == nil {
			log.Warn("usage: rolling up the hours past the retention failed; tried again in an hour", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var _ Reader = (*Postgres)(nil)
