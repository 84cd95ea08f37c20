package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/migrations"
)

func TestUpIsIdempotent(t *testing.T) {
	ctx := context.Background()
	pool := spatialtest.Migrated(t) // applies every migration once
	n, err := migrations.Up(ctx, stdlib.OpenDBFromPool(pool))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("second Up applied %d migrations, want 0", n)
	}
	for _, table := range []string{"places", "fences"} {
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil || !ok {
			t.Errorf("table %s: exists=%v, err=%v", table, ok, err)
		}
	}
}
