// Package sources opens what a server publishes: the bundled layers and
// geofence sets, the layers file's tables, functions, archives and files,
// and, where asked, every table discovery finds. It is the one place that
// knows every kind of source; each kind is read by its own package
// (pglayers, pgsets, pmtiles, featurefile).
package sources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/featurefile"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/tiles"
)

// Options say what to open.
type Options struct {
	// File is the layers file, read by layers.Load; its relative paths
	// are relative to Dir.
	File layers.File
	Dir  string
	// Pool is the PostGIS database of table and function layers and
	// sets, and of discovery; nil in embedded mode, where only archives
	// and files may be named.
	Pool         *pgxpool.Pool
	QueryTimeout time.Duration
	// Discover publishes every table with a geometry column the database
	// role may read, beside the file's layers.
	Discover bool
	// BundledTiles and BundledSets draw and answer the bundled layers and
	// sets.
	BundledTiles interface {
		Tile(ctx context.Context, l tiles.Layer, t maptile.Tile) ([]byte, error)
	}
	BundledSets geofence.Backend
	// HTTP fetches archives named by URL; http.DefaultClient if nil.
	HTTP *http.Client
}

// Published is what Open serves, and what it passed over and why.
type Published struct {
	Layers   *tiles.Catalog
	Sets     *geofence.Sets
	Entries  []Entry
	Skipped  []Skipped
	Warnings []string
	// Close releases what the sources hold open (archive files).
	Close func()
}

// Entry describes one published layer or set.
type Entry struct {
	Name    string
	What    string // "layer" or "geofence set"
	Kind    string // bundled, table, function, pmtiles, file, discovered
	Source  string
	MinZoom int
	MaxZoom int
	Fields  []string
}

// Skipped is a table discovery passed over, and why.
type Skipped struct {
	Table, Reason string
}

// Open opens every source o names; an error names the layer or set and
// what is wrong with it.
func Open(ctx context.Context, o Options) (Published, error) {
	p := Published{Close: func() {}}
	var closers []func()
	p.Close = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	ls := tiles.Bundled(o.BundledTiles)
	for _, l := range ls {
		p.Entries = append(p.Entries, entry(l, "bundled", "tileapi load"))
	}
	reserved := tiles.LayerNames()
	if err := o.File.Check(append(reserved, geofence.PlacesSet, geofence.BoundariesSet)); err != nil {
		return p, fmt.Errorf("sources: %w", err)
	}
	for _, cfg := range o.File.Layers {
		l, kind, closeLayer, ws, err := openLayer(ctx, o, cfg)
		if err != nil {
			p.Close()
			return p, fmt.Errorf("sources: layer %q: %w", cfg.Name, err)
		}
		p.Warnings = append(p.Warnings, ws...)
		if closeLayer != nil {
			closers = append(closers, closeLayer)
		}
		ls = append(ls, l)
		p.Entries = append(p.Entries, entry(l, kind, sourceOf(cfg)))
	}
	if o.Discover {
		found, skipped, warnings, err := discover(ctx, o, ls)
		if err != nil {
			p.Close()
			return p, err
		}
		for _, l := range found {
			ls = append(ls, l)
			p.Entries = append(p.Entries, entry(l, "discovered", l.Description))
		}
		p.Skipped, p.Warnings = skipped, append(p.Warnings, warnings...)
	}
	var err error
	if p.Layers, err = tiles.NewCatalog(ls...); err != nil {
		p.Close()
		return p, fmt.Errorf("sources: %w", err)
	}

	sets := geofence.Bundled(o.BundledSets)
	for _, s := range sets {
		p.Entries = append(p.Entries, setEntry(s, "bundled", "tileapi load"))
	}
	for _, cfg := range o.File.Geofences {
		s, err := openSet(ctx, o, cfg)
		if err != nil {
			p.Close()
			return p, fmt.Errorf("sources: geofence set %q: %w", cfg.Name, err)
		}
		sets = append(sets, s)
		src := cfg.Table
		if src == "" {
			src = cfg.File
		}
		p.Entries = append(p.Entries, setEntry(s, cfg.Kind(), src))
	}
	if p.Sets, err = geofence.NewSets(sets...); err != nil {
		p.Close()
		return p, fmt.Errorf("sources: %w", err)
	}
	return p, nil
}

// openLayer opens one layer of the file: its tiles.Layer, its kind, what
// closes it (nil for nothing) and what it serves but should not.
func openLayer(ctx context.Context, o Options, cfg layers.Layer) (tiles.Layer, string, func(), []string, error) {
	switch cfg.Kind() {
	case layers.Table, layers.Function:
		if o.Pool == nil {
			return tiles.Layer{}, "", nil, nil, fmt.Errorf("a %s layer needs a database: set DATABASE_URL, or serve the data from a file (file:)", cfg.Kind())
		}
		l, ws, err := openPostGISLayer(ctx, o, cfg)
		return l, cfg.Kind(), nil, ws, err
	case layers.PMTiles:
		l, closeArchive, err := openArchive(ctx, o, cfg)
		return l, layers.PMTiles, closeArchive, nil, err
	}
	l, err := openFileLayer(o, cfg)
	return l, layers.FileKind, nil, nil, err
}

// openFileLayer loads a GeoJSON or FlatGeobuf file into memory.
func openFileLayer(o Options, cfg layers.Layer) (tiles.Layer, error) {
	c, err := featurefile.Load(resolve(o.Dir, cfg.File))
	if err != nil {
		return tiles.Layer{}, err
	}
	features, fields, err := keepProperties(c, cfg.Properties)
	if err != nil {
		return tiles.Layer{}, err
	}
	minZoom, maxZoom := cfg.Zooms()
	l := tiles.Layer{
		Name: cfg.Name, Description: cfg.Description, Attribution: cfg.Attribution,
		MinZoom: minZoom, MaxZoom: maxZoom, MaxFeatures: cfg.Features(), Fields: fields,
		Source: tiles.NewFeatures(cfg.Name, features, cfg.Features()),
	}
	if !c.Bounds.IsEmpty() || c.Bounds.Min != c.Bounds.Max {
		l.Bounds = [4]float64{c.Bounds.Min[0], max(c.Bounds.Min[1], -tiles.MaxLatitude), c.Bounds.Max[0], min(c.Bounds.Max[1], tiles.MaxLatitude)}
	}
	return l, nil
}

// keepProperties returns c's features with only the properties named (all
// where names is nil), and the fields of those.
func keepProperties(c *featurefile.Collection, names []string) ([]*geojson.Feature, map[string]string, error) {
	fields := map[string]string{}
	for _, f := range c.Fields {
		fields[f.Name] = f.Type
	}
	if names == nil {
		return c.Features, fields, nil
	}
	kept := map[string]string{}
	for _, n := range names {
		t, ok := fields[n]
		if !ok {
			return nil, nil, fmt.Errorf("properties: the file has no property %q; it has %s", n, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
		kept[n] = t
	}
	fs := make([]*geojson.Feature, len(c.Features))
	for i, f := range c.Features {
		g := *f
		g.Properties = geojson.Properties{}
		for _, n := range names {
			if v, ok := f.Properties[n]; ok {
				g.Properties[n] = v
			}
		}
		fs[i] = &g
	}
	return fs, kept, nil
}

// openSet opens one geofence set of the file.
func openSet(ctx context.Context, o Options, cfg layers.Set) (geofence.Set, error) {
	if cfg.Kind() == layers.Table {
		if o.Pool == nil {
			return geofence.Set{}, errors.New("a table set needs a database: set DATABASE_URL, or serve the data from a file (file:)")
		}
		return openPostGISSet(ctx, o, cfg)
	}
	c, err := featurefile.Load(resolve(o.Dir, cfg.File))
	if err != nil {
		return geofence.Set{}, err
	}
	features, _, err := keepProperties(c, cfg.Properties)
	if err != nil {
		return geofence.Set{}, err
	}
	return geofence.NewFileSet(cfg.Name, cfg.Description, features, nil)
}

// resolve is path relative to dir, unless absolute or a URL.
func resolve(dir, path string) string {
	if filepath.IsAbs(path) || strings.Contains(path, "://") || dir == "" {
		return path
	}
	return filepath.Join(dir, path)
}

func sourceOf(cfg layers.Layer) string {
	return cfg.Table + cfg.Function + cfg.PMTiles + cfg.File
}

func entry(l tiles.Layer, kind, source string) Entry {
	return Entry{Name: l.Name, What: "layer", Kind: kind, Source: source, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom,
		Fields: slices.Sorted(maps.Keys(l.Fields))}
}

func setEntry(s geofence.Set, kind, source string) Entry {
	return Entry{Name: s.Name, What: "geofence set", Kind: kind, Source: source, Fields: slices.Sorted(maps.Keys(s.Fields))}
}
