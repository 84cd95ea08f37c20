// Package spatialtest gives tests a PostGIS schema of their own in the test
// database found by testenv, migrated and, where asked, loaded with the
// bundled dataset. Schemas are named after the process so that test binaries
// running at the same time (go test ./...) never share tables.
package spatialtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/seed"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/migrations"
)

var seq atomic.Int64

// Schema creates an empty schema, dropped when tb ends, and returns a
// database URL whose search_path puts it first, then public (where the
// postgis extension lives).
func Schema(tb testing.TB) string {
	tb.Helper()
	u, drop, err := newSchema(context.Background(), testenv.DatabaseURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(drop)
	return u
}

// Migrated returns a pool on a new schema with the migrations applied,
// closed and dropped when tb ends.
func Migrated(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, Schema(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	if _, err := migrations.Up(ctx, stdlib.OpenDBFromPool(pool)); err != nil {
		tb.Fatal(err)
	}
	return pool
}

// shared is the loaded schema shared by the tests of one binary.
var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	data *dataset.Dataset
	drop func()
	err  error
}

// Loaded returns a pool on a schema migrated and loaded with the bundled
// dataset, and the dataset. It is made once per test binary and shared by
// its tests, which must not write to it; Run drops it at the end.
func Loaded(tb testing.TB) (*pgxpool.Pool, *dataset.Dataset) {
	tb.Helper()
	base := testenv.DatabaseURL(tb)
	shared.once.Do(func() {
		shared.err = loadShared(context.Background(), base)
	})
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.pool, shared.data
}

func loadShared(ctx context.Context, base string) error {
	u, drop, err := newSchema(ctx, base)
	if err != nil {
		return err
	}
	shared.drop = drop
	if shared.pool, err = pgxpool.New(ctx, u); err != nil {
		return err
	}
	if _, err := migrations.Up(ctx, stdlib.OpenDBFromPool(shared.pool)); err != nil {
		return err
	}
	if shared.data, err = dataset.Load(); err != nil {
		return err
	}
	_, err = seed.Dataset(ctx, shared.pool, shared.data, nil)
	return err
}

// Run runs the tests of m, then drops the schema Loaded made and stops the
// servers testenv started; it returns m's exit code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }
func Run(m *testing.M) int {
	return testenv.Main(runFunc(func() int {
		code := m.Run()
		if shared.pool != nil {
			shared.pool.Close()
		}
		if shared.drop != nil {
			shared.drop()
		}
		return code
	}))
}

// runFunc runs tests and returns their exit code, as testing.M does.
type runFunc func() int

func (f runFunc) Run() int { return f() }

func newSchema(ctx context.Context, base string) (string, func(), error) {
	name := fmt.Sprintf("tileapi_test_%d_%d", os.Getpid(), seq.Add(1))
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("spatialtest: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", nil, fmt.Errorf("spatialtest: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("spatialtest: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name+",public")
	u.RawQuery = q.Encode()
	drop := func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
	}
	return u.String(), drop, nil
}

// UsesIndex fails tb unless PostgreSQL's plan for sql with args (EXPLAIN)
// scans the index named index, and shows the plan where it does not.
func UsesIndex(tb testing.TB, pool *pgxpool.Pool, index, sql string, args ...any) {
	tb.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN "+sql, args...)
	if err != nil {
		tb.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	// An index appears as "Index Scan using idx on t" or "Bitmap Index Scan
	// on idx".
	if p := strings.Join(plan, "\n"); !strings.Contains(p, " on "+index) && !strings.Contains(p, " using "+index) {
		tb.Errorf("the plan does not use %s:\n%s", index, p)
	}
}

// Measure runs op b.N times and reports, beside the mean, the median and
// the slowest run in milliseconds (p50-ms, max-ms).
func Measure(b *testing.B, op func() error) {
	b.Helper()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(times[len(times)-1])/1e6, "max-ms")
}
