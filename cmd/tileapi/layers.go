package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/sources"
	"github.com/tileapi/tileapi/tiles"
)

// sourceOptions are what sources.Open needs of serve's settings: the
// layers file read and checked, its directory, the pool and discovery.
func sourceOptions(layersFile string, discover bool, pool *pgxpool.Pool, timeout time.Duration) (sources.Options, error) {
	o := sources.Options{Pool: pool, QueryTimeout: timeout, Discover: discover}
	if discover && pool == nil {
		return o, fmt.Errorf("%s: discovery reads a database: set DATABASE_URL", setting("discover", "TILEAPI_DISCOVER"))
	}
	if layersFile == "" {
		return o, nil
	}
	f, err := layers.Load(layersFile)
	if err != nil {
		return o, err
	}
	o.File, o.Dir = f, filepath.Dir(layersFile)
	return o, nil
}

// openPublished opens the sources serve would with the same settings. The
// bundled layers are drawn from the database at url, or from the bundled
// dataset in memory where there is none; with draw false they are only
// listed (an empty dataset, not loaded).
func openPublished(ctx context.Context, layersFile string, discover bool, url string, draw bool) (sources.Published, func(), error) {
	var pool *pgxpool.Pool
	closeAll := func() {}
	if url != "" {
		var err error
		if pool, err = pgxpool.New(ctx, url); err != nil {
			return sources.Published{}, nil, fmt.Errorf("connect: %w", err)
		}
		closeAll = pool.Close
	}
	o, err := sourceOptions(layersFile, discover, pool, exportQueryTimeout)
	if err != nil {
		closeAll()
		return sources.Published{}, nil, err
	}
	switch {
	case pool != nil:
		o.BundledTiles, o.BundledSets = tiles.NewPostGIS(pool, exportQueryTimeout), geofence.NewPostGIS(pool, exportQueryTimeout)
	case draw:
		d, err := dataset.Load()
		if err != nil {
			closeAll()
			return sources.Published{}, nil, err
		}
		o.BundledTiles, o.BundledSets = tiles.NewMemory(d), geofence.NewMemory(d)
	default:
		empty := &dataset.Dataset{}
		o.BundledTiles, o.BundledSets = tiles.NewMemory(empty), geofence.NewMemory(empty)
	}
	p, err := sources.Open(ctx, o)
	if err != nil {
		closeAll()
		return p, nil, err
	}
	return p, func() { p.Close(); closeAll() }, nil
}

// exportQueryTimeout bounds each query of tileapi layers and export: a
// tile rendered once for an archive may take longer than serve allows.
const exportQueryTimeout = time.Minute

// runLayers prints what tileapi serve would publish with the same layers
// file, database and discovery, and why discovery skipped a table: every
// source is opened and checked as serve does.
func runLayers(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("layers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	layersFile := fs.String("layers-file", getenv("TILEAPI_LAYERS_FILE"), "YAML or JSON `file` of your own layers and geofence sets ($TILEAPI_LAYERS_FILE)")
	discoverDefault, _ := parseBool(getenv("TILEAPI_DISCOVER"))
	discover := fs.Bool("discover", discoverDefault, "also list every table discovery would publish, and those it would skip ($TILEAPI_DISCOVER)")
	url := databaseFlag(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("layers: unexpected argument %q", fs.Arg(0))
	}
	p, closeAll, err := openPublished(ctx, *layersFile, *discover, *url, false)
	if err != nil {
		return err
	}
	defer closeAll()
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "name\twhat\tkind\tsource\tzooms\tfields")
	for _, e := range p.Entries {
		zooms := "-"
		if e.What == "layer" {
			zooms = fmt.Sprintf("%d-%d", e.MinZoom, e.MaxZoom)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.What, e.Kind, e.Source, zooms, strings.Join(e.Fields, ", "))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, warning := range p.Warnings {
		fmt.Fprintln(stdout, "warning:", warning)
	}
	for _, s := range p.Skipped {
		fmt.Fprintf(stdout, "skipped %s: %s\n", s.Table, s.Reason)
	}
	return nil
}
