package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// runMigrate applies the schema migrations that the database lacks.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	pool, n, err := connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	pool.Close()
	fmt.Fprintf(stdout, "applied %d migrations\n", n)
	return nil
}
