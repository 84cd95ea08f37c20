// Package pgq runs one PostgreSQL query under a server-side statement
// timeout, in a single round trip, and sorts what can go wrong into the two
// failures a caller answers differently: the query ran out of time, or the
// database could not be reached.
package pgq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrTimeout is matched by a query cut short by its statement timeout or
	// its deadline: a hung database ends here too.
	ErrTimeout = errors.New("database query timed out")
	// ErrUnavailable is matched by a query that failed because the database
	// could not be reached or is shutting down: nothing about the query
	// itself was wrong, and it may succeed if retried later.
	ErrUnavailable = errors.New("database unavailable")
)

// grace is how long past the statement timeout the client waits for the
// server's answer before giving up on the connection: the server cancels
// the query itself at the timeout, so only a hung or unreachable server
// takes longer.
const grace = 250 * time.Millisecond

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
	// GenericPlan plans once per connection, whatever the values, for
	// queries run often enough that planning would cost as much as running
	// them, and whose one plan suits every value they are given.
	GenericPlan Plan = "force_generic_plan"
)

// settingsSQL is SET LOCAL statement_timeout and plan_cache_mode with
// parameters: the settings last until the end of the pipeline's implicit
// transaction, so they cover the query queued after them and nothing else on
// the pooled connection.
const settingsSQL = `SELECT set_config('statement_timeout', $1, true), set_config('plan_cache_mode', $2, true)`

// Store is what a PostGIS backend (geofence's, tiles') queries: a database
// and the statement timeout each of its queries runs under.
type Store struct {
	db      DB
	timeout time.Duration
}

// NewStore returns a Store of db whose queries run under timeout.
func NewStore(db DB, timeout time.Duration) Store { return Store{db: db, timeout: timeout} }

// Query sends sql with args to s's database in one pipeline after setting
// statement_timeout to s's timeout (at least a millisecond) and
// plan_cache_mode to plan, and passes its rows to collect, which must read
// or close them (pgx.CollectRows does). The query is cancelled when ctx is
// done or the server's timeout fires, whichever comes first.
//
// Its errors match ErrTimeout or ErrUnavailable where they are one of those
// (see Classify).
func Query[T any](ctx context.Context, s Store, plan Plan, sql string, args []any, collect func(pgx.Rows) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout+grace)
	defer cancel()
	v, err := query(ctx, s.db, s.timeout, plan, sql, args, collect)
	return v, Classify(err)
}

func query[T any](ctx context.Context, db DB, timeout time.Duration, plan Plan, sql string, args []any, collect func(pgx.Rows) (T, error)) (T, error) {
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

// Classify wraps err so that it matches ErrTimeout when the query ran out of
// time (a statement timeout, SQLSTATE 57014, or a passed deadline) and
// ErrUnavailable when the database could not be reached (a failed dial or a
// broken connection, or a server refusing connections or shutting down:
// SQLSTATE classes 08, 53 and 57P). Other errors, such as those of bad SQL,
// and a nil err are returned as they are, and so is context.Canceled: the
// caller went away.
func Classify(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return &classified{kind: ErrTimeout, err: err}
	case errors.As(err, &pgErr):
		if pgErr.Code == "57014" {
			return &classified{kind: ErrTimeout, err: err}
		}
		if strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") || strings.HasPrefix(pgErr.Code, "57P") {
			return &classified{kind: ErrUnavailable, err: err}
		}
		return err
	case belowSQL(err):
		return &classified{kind: ErrUnavailable, err: err}
	}
	return err
}

// belowSQL reports a failure of the connection rather than of the query: a
// dial, a TLS handshake, a connection broken or closed under the query.
func belowSQL(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// classified is an error sorted into ErrTimeout or ErrUnavailable.
type classified struct {
	kind error
	err  error
}

func (c *classified) Error() string   { return c.kind.Error() + ": " + c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.kind, c.err} }
