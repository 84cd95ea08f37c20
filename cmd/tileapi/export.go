package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paulmach/orb"
	"github.com/schollz/progressbar/v3"

	"github.com/tileapi/tileapi/internal/export"
	"github.com/tileapi/tileapi/internal/pmtiles"
)

// runExport renders one layer into a PMTiles archive (see package export).
func runExport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	layersFile := fs.String("layers-file", getenv("TILEAPI_LAYERS_FILE"), "YAML or JSON `file` of your own layers ($TILEAPI_LAYERS_FILE)")
	discover := fs.Bool("discover", false, "also find the tables discovery would publish")
	url := databaseFlag(fs, getenv)
	layer := fs.String("layer", "", "the `name` of the layer to render")
	zooms := fs.String("zoom", "0-8", "the zoom `range` to render, min-max")
	bounds := fs.String("bounds", "", "the area to render, `west,south,east,north` in degrees; default the layer's")
	out := fs.String("o", "", "the archive `file` to write")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layer == "" || *out == "" {
		return errors.New("export: -layer and -o are required")
	}
	var o export.Options
	var err error
	if o.MinZoom, o.MaxZoom, err = parseZooms(*zooms); err != nil {
		return err
	}
	if o.Bounds, err = parseBounds(*bounds); err != nil {
		return err
	}
	p, closeAll, err := openPublished(ctx, *layersFile, *discover, *url, true)
	if err != nil {
		return err
	}
	defer closeAll()
	l, err := p.Layers.Lookup(*layer)
	if err != nil {
		return fmt.Errorf("export: -layer: %w; the layers are %s", err, strings.Join(p.Layers.Names(), ", "))
	}
	// Written beside the target and renamed, so a failed export leaves no
	// half archive under its name.
	f, err := os.CreateTemp(filepath.Dir(*out), ".export-*.pmtiles")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	w, err := pmtiles.NewWriter(f, filepath.Dir(*out))
	if err != nil {
		return err
	}
	defer w.Close()
	if !*quiet {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(stderr), progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionShowCount())
		o.Progress = func(done, total int) {
			bar.ChangeMax(total)
			_ = bar.Set(done)
		}
	}
	start := time.Now()
	st, err := export.Archive(ctx, l, o, w)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.Rename(f.Name(), *out); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: layer %s, zooms %d-%d, %d tiles (%d bytes before compression), %d empty tiles left out, in %s\n",
		*out, l.Name, o.MinZoom, o.MaxZoom, st.Tiles, st.Bytes, st.Empty, time.Since(start).Round(time.Millisecond))
	return err
}

// parseZooms reads "min-max" (or one zoom).
func parseZooms(s string) (int, int, error) {
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || a < 0 || b < a || b > 22 {
		return 0, 0, fmt.Errorf("export: -zoom %q: want min-max, such as 0-8, within 0-22", s)
	}
	return a, b, nil
}

// parseBounds reads "west,south,east,north"; "" is the zero bound.
func parseBounds(s string) (orb.Bound, error) {
	if s == "" {
		return orb.Bound{}, nil
	}
	parts := strings.Split(s, ",")
	var v [4]float64
	var err error
	for i := range v {
		if len(parts) != 4 {
			break
		}
		if v[i], err = strconv.ParseFloat(strings.TrimSpace(parts[i]), 64); err != nil {
			break
		}
	}
	if len(parts) != 4 || err != nil || v[0] < -180 || v[2] > 180 || v[1] < -90 || v[3] > 90 || v[0] >= v[2] || v[1] >= v[3] {
		return orb.Bound{}, fmt.Errorf("export: -bounds %q: want west,south,east,north in degrees, west below east and south below north", s)
	}
	return orb.Bound{Min: orb.Point{v[0], v[1]}, Max: orb.Point{v[2], v[3]}}, nil
}
