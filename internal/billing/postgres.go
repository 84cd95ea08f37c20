package billing

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/usage"
)

// Postgres reads the usage to export from the usage_hourly and
// usage_daily tables (migrations/00011_usage_history.sql,
// 00013_usage_overage.sql).
type Postgres struct {
	pool *pgxpool.Pool
}

// NewPostgres returns a Postgres reading pool's database.
func NewPostgres(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool} }

// selectRows reads the rows of keys in [$1, $2): the hours still in
// usage_hourly and the days rolled up into usage_daily (a day counts in
// the range where its midnight UTC does). A rollup moves an hour from one
// table to the other, so no unit is in both. Requests without a key (an
// ip: identity) bill no one and are left out. $3 and $4 select one key or
// one customer's keys where they are not zero. The order is fixed, so an
// export of the same rows is the same bytes.
const selectRows = `
SELECT period, identity, key_id, COALESCE(customer_id, 0), start, route, layer, units_charged, units_given_back, units_overage FROM (
	SELECT 'hour' AS period, identity, key_id, customer_id, hour AS start, route, layer, units_charged, units_given_back, units_overage
	FROM usage_hourly
	WHERE hour >= $1 AND hour < $2
	UNION ALL
	SELECT 'day', identity, key_id, customer_id, day::timestamp AT TIME ZONE 'UTC', route, layer, units_charged, units_given_back, units_overage
	FROM usage_daily
	WHERE day::timestamp AT TIME ZONE 'UTC' >= $1 AND day::timestamp AT TIME ZONE 'UTC' < $2
) AS u
WHERE key_id IS NOT NULL AND ($3 = 0 OR key_id = $3) AND ($4 = 0 OR customer_id = $4)
ORDER BY start, period, identity COLLATE "C", route COLLATE "C", layer COLLATE "C"`

// Events returns the events of the usage q selects, in a fixed order: a
// usage and an adjustment event per row, or, if settled, one settled
// event per row, and its overage event (see Events).
func (p *Postgres) Events(ctx context.Context, q Query, settled bool) ([]Event, error) {
	rows, err := p.pool.Query(ctx, selectRows, q.From, q.To, q.KeyID, q.CustomerID)
	if err != nil {
		return nil, fmt.Errorf("billing: read usage: %w", err)
	}
	var out []Event
	var r usage.Row
	var period string
	_, err = pgx.ForEachRow(rows, []any{&period, &r.Identity, &r.KeyID, &r.CustomerID, &r.Start, &r.Route, &r.Layer, &r.Charged, &r.GivenBack, &r.Overage}, func() error {
		out = append(out, Events(r, period, settled)...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("billing: read usage: %w", err)
	}
	return out, nil
}
