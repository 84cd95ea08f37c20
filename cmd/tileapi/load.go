package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tileapi/tileapi/dataset"
	"github.com/tileapi/tileapi/load"
)

// runLoad applies pending migrations, then replaces the places and fences
// with the bundled dataset, drawing a progress bar where stdout is a
// terminal.
func runLoad(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	d, err := dataset.Load()
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	pool, _, err := connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer pool.Close()
	var progress io.Writer
	if isTerminal(stdout) {
		progress = stdout
	}
	c, err := load.Dataset(ctx, pool, d, progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loaded %v in %v\n", c, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
