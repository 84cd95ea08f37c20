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

// setTimeoutSQL is SET LOCAL statement_timeout with a parameter: the setting
// lasts until the end of the pipeline's implicit transaction, so it covers
// the query queued after it and nothing else on the pooled connection.
const setTimeoutSQL = `SELECT set_config('statement_timeout', $1, true)`

// Query sends sql with args in one pipeline after setting statement_timeout
// to timeout (at least a millisecond), and passes its rows to collect, which
// must read or close them (pgx.CollectRows does). The query is cancelled when
// ctx is done or the server's timeout fires, whichever comes first.
func Query[T any](ctx context.Context, db DB, timeout time.Duration, sql string, args []any, collect func(pgx.Rows) (T, error)) (T, error) {
	var zero T
	b := &pgx.Batch{}
	b.Queue(setTimeoutSQL, strconv.FormatInt(max(timeout.Milliseconds(), 1), 10))
	b.Queue(sql, args...)
	br := db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return zero, fmt.Errorf("set statement_timeout: %w", err)
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
