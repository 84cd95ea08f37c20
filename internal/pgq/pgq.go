// Package pgq runs one PostgreSQL query under a server-side statement
// timeout, in a single round trip.
package pgq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// DB is what Query needs: a pgxpool.Pool, a pgx.Conn or a pgx.Tx.
type DB interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Plan is a value of plan_cache_mode: how PostgreSQL plans a prepared
// statement (pgx prepares and caches every statement).
type Plan string

// The plans a query may ask for.
const (
	// AutoPlan lets PostgreSQL switch to a generic plan once it costs no
	// more than the custom ones: for queries whose best plan does not depend
	// on the parameters' values.
	AutoPlan Plan = "auto"
	// CustomPlan plans every execution for its values, for queries whose
	// best plan does (a tile's population threshold and size).
	CustomPlan Plan = "force_custom_plan"
)

// settingsSQL is SET LOCAL statement_timeout and plan_cache_mode with
// parameters: the settings last until the end of the pipeline's implicit
// transaction, so they cover the query queued after them and nothing else on
// the pooled connection.
const settingsSQL = `SELECT set_config('statement_timeout', $1, true), set_config('plan_cache_mode', $2, true)`

// Query sends sql with args in one pipeline after setting statement_timeout
// to timeout (at least a millisecond) and plan_cache_mode to plan, and passes
// its rows to collect, which must read or close them (pgx.CollectRows does).
// The query is cancelled when ctx is done or the server's timeout fires,
// whichever comes first.
func Query[T any](ctx context.Context, db DB, timeout time.Duration, plan Plan, sql string, args []any, collect func(pgx.Rows) (T, error)) (T, error) {
	var zero T
	b := &pgx.Batch{}
	b.Queue(settingsSQL, strconv.FormatInt(max(timeout.Milliseconds(), 1), 10), string(plan))
	b.Queue(sql, args...)
	br := db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return zero, fmt.Errorf("set statement_timeout and plan_cache_mode: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return zero, err
	}
	v, err := collect(rows)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return zero, err
	}
	return v, nil
}

// Structs collects rows into structs by column name (see
// pgx.RowToStructByName); pass it to Query.
func Structs[T any](rows pgx.Rows) ([]T, error) {
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}
