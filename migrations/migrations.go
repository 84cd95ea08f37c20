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

// Up applies every migration not yet applied to db and returns how many it
// applied; on an up-to-date database it does nothing. goose records the
// applied versions in the goose_db_version table of db's search_path and
// holds a session advisory lock while it runs, so concurrent callers wait.
func Up(ctx context.Context, db *sql.DB) (int, error) {
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
