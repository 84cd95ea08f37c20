package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/seed"
)

// runLoad applies pending migrations, then replaces the places and fences
// with the bundled dataset, or with the user's files where given, drawing a
// progress bar where stdout is a terminal.
func runLoad(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	places := fs.String("places", "", "CSV of places to load instead of the bundled GeoNames cities (same columns; may be gzipped)")
	countries := fs.String("countries", "", "GeoJSON of countries to load instead of the bundled ones (id, properties.name; may be gzipped)")
	counties := fs.String("counties", "", "GeoJSON of counties to load instead of the bundled ones (id = FIPS, properties.name; may be gzipped)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	var src dataset.Sources
	for _, f := range []struct {
		path string
		src  **dataset.Source
	}{{*places, &src.Places}, {*countries, &src.Countries}, {*counties, &src.Counties}} {
		if f.path == "" {
			continue
		}
		file, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		defer func() { err = errors.Join(err, file.Close()) }()
		*f.src = &dataset.Source{Name: f.path, R: file}
	}
	d, err := dataset.LoadFrom(src)
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
	c, err := seed.Dataset(ctx, pool, d, progress)
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
