package pgq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/pgq"
	"github.com/tileapi/tileapi/internal/testenv"
)

func one(rows pgx.Rows) (int, error) { return pgx.CollectExactlyOneRow(rows, pgx.RowTo[int]) }

// Query sorts real failures of a real server into ErrTimeout and
// ErrUnavailable, and leaves the others alone.
func TestQueryFailures(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Nothing listens on port 1.
	dead, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	canceled, cancel := context.WithCancel(ctx)
	cancel()

	for _, tc := range []struct {
		name        string
		ctx         context.Context
		db          *pgxpool.Pool
		sql         string
		timeout     bool
		unavailable bool
		canceled    bool
	}{
		{name: "ok", ctx: ctx, db: pool, sql: "SELECT 1"},
		{name: "statement timeout", ctx: ctx, db: pool, sql: "SELECT 1 FROM pg_sleep(2)", timeout: true},
		{name: "unreachable", ctx: ctx, db: dead, sql: "SELECT 1", unavailable: true},
		{name: "bad SQL", ctx: ctx, db: pool, sql: "SELECT no_such_column"},
		{name: "caller gone", ctx: canceled, db: pool, sql: "SELECT 1", canceled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pgq.Query(tc.ctx, pgq.NewStore(tc.db, 100*time.Millisecond), pgq.AutoPlan, tc.sql, nil, one)
			if got := errors.Is(err, pgq.ErrTimeout); got != tc.timeout {
				t.Errorf("%v: matches ErrTimeout %v, want %v", err, got, tc.timeout)
			}
			if got := errors.Is(err, pgq.ErrUnavailable); got != tc.unavailable {
				t.Errorf("%v: matches ErrUnavailable %v, want %v", err, got, tc.unavailable)
			}
			if got := errors.Is(err, context.Canceled); got != tc.canceled {
				t.Errorf("%v: matches context.Canceled %v, want %v", err, got, tc.canceled)
			}
			if tc.name != "ok" && err == nil {
				t.Error("no error")
			}
		})
	}
}
