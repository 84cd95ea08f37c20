// Package migrations holds tileapi's PostgreSQL schema as embedded goose SQL
// migrations and applies them.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// createPostGIS needs the extension installed on the server, and the
// privilege to create it (a superuser, as PostGIS is not a trusted
// extension) only where the database lacks it.
const createPostGIS = `CREATE EXTENSION IF NOT EXISTS postgis`

// Up applies every migration not yet applied to db and returns how many it
// applied; on an up-to-date database it does nothing. goose records the
// applied versions in the goose_db_version table of db's search_path and
// holds a session advisory lock while it runs, so concurrent callers wait.
//
// The schema needs PostGIS: Up first creates the extension if the database
// lacks it, and where it cannot (PostGIS not installed, or no privilege to
// create it) returns an error saying how to get it, having written
// nothing.
func Up(ctx context.Context, db *sql.DB) (int, error) {
	if _, err := db.ExecContext(ctx, createPostGIS); err != nil {
		return 0, fmt.Errorf("migrations: the database has no PostGIS and it could not be created (%w); "+
			"install it on the server (Debian: apt-get install postgresql-15-postgis-3) and run CREATE EXTENSION postgis "+
			"as a superuser, or use the postgis/postgis image", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: up: %w", err)
	}
	return len(res), nil
}
