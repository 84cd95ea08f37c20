package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tileapi/tileapi/migrations"
)

// databaseFlag adds the -database-url flag, which defaults to $DATABASE_URL
// and prints redacted.
func databaseFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	url := new(string)
	secretURLVar(fs, url, "database-url", getenv("DATABASE_URL"), "PostgreSQL `URL` of a database with PostGIS ($DATABASE_URL)")
	return url
}

// connect opens a pool on url and applies any pending migrations, returning
// how many it applied.
func connect(ctx context.Context, url string) (*pgxpool.Pool, int, error) {
	if url == "" {
		return nil, 0, errors.New("no database: set DATABASE_URL or -database-url")
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, 0, fmt.Errorf("connect: %w", err)
	}
	n, err := migrations.Up(ctx, stdlib.OpenDBFromPool(pool))
	if err != nil {
		pool.Close()
		return nil, 0, err
	}
	return pool, n, nil
}
