package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
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

// On a database without PostGIS, as a role that may not create it, Up
// says how to get it and writes nothing: no goose table, no table of ours.
func TestUpWithoutPostGIS(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	name := fmt.Sprintf("tileapi_nopostgis_%d", time.Now().UnixNano())
	for _, sql := range []string{
		// A password, for servers that ask for one over TCP (the postgis
		// image does; a local trust setup ignores it).
		"CREATE ROLE " + name + " LOGIN NOSUPERUSER PASSWORD '" + name + "'",
		"CREATE DATABASE " + name + " OWNER " + name,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Exec(ctx, "DROP ROLE IF EXISTS "+name)
	})
	cfg := admin.Config().Copy()
	cfg.User, cfg.Database, cfg.Password = name, name, name
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })

	_, err = migrations.Up(ctx, db)
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql-15-postgis-3") {
		t.Fatalf("Up without PostGIS: %v, want how to get it", err)
	}
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("Up left %d tables behind", tables)
	}
}
