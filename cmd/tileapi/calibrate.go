package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tileapi/tileapi/cost"
	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/calibrate"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/tiles"
)

// runCalibrate times a sample of requests on the loaded database, prints
// what each route took against its price, and the work model fitted to
// them, as the "settle" member of a plan's cost in a plans file.
func runCalibrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	n := fs.Int("samples", 200, "requests measured of each route")
	seed := fs.Uint64("seed", 1, "seed of the places and sizes drawn")
	plotPath := fs.String("plot", "", "also write a plot of time against price to this PNG or SVG file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pool, _, err := connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	defer pool.Close()
	d, err := dataset.Load() // the places to sample around
	if err != nil {
		return err
	}
	m := plans.DefaultCost()
	const timeout = time.Minute // measure, do not cut short
	samples, err := calibrate.Run(ctx, geofence.NewPostGIS(pool, timeout), tiles.NewPostGIS(pool, timeout), d, m, *n, *seed)
	if err != nil {
		return err
	}
	w, err := cost.FitWork(samples)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "route\trequests\tmedian ms\tp90 ms\tmedian price\tmedian settled\t")
	for _, route := range []string{"within", "contains", "places", "countries", "counties"} {
		var ms, price, settled []float64
		for _, s := range samples {
			if s.Route == route {
				ms = append(ms, s.MS)
				price = append(price, float64(s.Price))
				settled = append(settled, float64((cost.Model{Settle: &w}).Work(s.Price, s.MS, s.Features)))
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.0f\t%.0f\t\n", route, len(ms), quantile(ms, 0.5), quantile(ms, 0.9), quantile(price, 0.5), quantile(settled, 0.5))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *plotPath != "" {
		if err := calibrate.Plot(*plotPath, samples, w); err != nil {
			return err
		}
	}
	b, err := json.Marshal(map[string]cost.WorkModel{"settle": w})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nthe fitted work model, for a plan's \"cost\" in a plans file:\n%s\n", b)
	return nil
}

// quantile is the q-quantile of xs, nearest rank.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
