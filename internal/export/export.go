// Package export renders a tile layer into a PMTiles archive, tile by
// tile over a zoom range and an area, as martin-cp does: a table layer
// rendered once and served from the archive costs the database nothing.
package export

import (
	"context"
	"errors"
	"fmt"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/pmtiles"
	"github.com/tileapi/tileapi/tiles"
)

// Options bound what Archive renders.
type Options struct {
	MinZoom, MaxZoom int
	// Bounds is the area rendered, in degrees; the layer's bounds (the
	// world where it has none) if empty.
	Bounds orb.Bound
	// Progress, if set, is told of each tile rendered, and of how many
	// there are in all.
	Progress func(done, total int)
}

// Stats count what Archive wrote.
type Stats struct {
	Tiles, Empty int // rendered with features, and empty (not written)
	Bytes        int // of the tiles written, uncompressed
}

// MaxTiles caps the tiles one export renders: zoom 12 over the world is
// 22 million.
const MaxTiles = 5_000_000

// Archive renders every tile of l in o's zooms and area into w and
// finishes the archive, with the layer's TileJSON fields as its metadata.
func Archive(ctx context.Context, l tiles.Layer, o Options, w *pmtiles.Writer) (Stats, error) {
	var st Stats
	if o.MinZoom < l.MinZoom || o.MaxZoom > l.MaxZoom || o.MinZoom > o.MaxZoom {
		return st, fmt.Errorf("export: zooms %d-%d are not within layer %s's %d-%d", o.MinZoom, o.MaxZoom, l.Name, l.MinZoom, l.MaxZoom)
	}
	if len(l.Params) > 0 {
		return st, fmt.Errorf("export: layer %s takes parameters: a function layer's tiles depend on the request", l.Name)
	}
	b := o.Bounds
	if b.IsZero() {
		b = orb.Bound{Min: orb.Point{l.Bounds[0], l.Bounds[1]}, Max: orb.Point{l.Bounds[2], l.Bounds[3]}}
		if b.IsZero() {
			b = orb.Bound{Min: orb.Point{-180, -tiles.MaxLatitude}, Max: orb.Point{180, tiles.MaxLatitude}}
		}
	}
	b.Min[1], b.Max[1] = max(b.Min[1], -tiles.MaxLatitude), min(b.Max[1], tiles.MaxLatitude)
	total := 0
	for z := o.MinZoom; z <= o.MaxZoom; z++ {
		lo, hi := tileRange(b, z)
		total += int(hi.X-lo.X+1) * int(hi.Y-lo.Y+1)
		if total > MaxTiles {
			return st, fmt.Errorf("export: zooms %d-%d over %v are more than %d tiles: export a smaller area or fewer zooms", o.MinZoom, o.MaxZoom, b, MaxTiles)
		}
	}
	done := 0
	for z := o.MinZoom; z <= o.MaxZoom; z++ {
		lo, hi := tileRange(b, z)
		for x := lo.X; x <= hi.X; x++ {
			for y := lo.Y; y <= hi.Y; y++ {
				t := maptile.New(x, y, maptile.Zoom(z))
				body, err := l.Tile(ctx, t, tiles.Params{})
				if err != nil {
					return st, fmt.Errorf("export: %w", err)
				}
				if len(body) == 0 {
					st.Empty++
				} else {
					if err := w.AddTile(uint8(z), x, y, body); err != nil {
						return st, fmt.Errorf("export: %w", err)
					}
					st.Tiles++
					st.Bytes += len(body)
				}
				if done++; o.Progress != nil {
					o.Progress(done, total)
				}
			}
		}
	}
	if st.Tiles == 0 {
		return st, errors.New("export: every tile is empty: nothing to write")
	}
	tj := l.TileJSON("")
	h := pmtiles.Header{
		TileType: pmtiles.MVT, MinZoom: uint8(o.MinZoom), MaxZoom: uint8(o.MaxZoom),
		Bounds: [4]float64{b.Min[0], b.Min[1], b.Max[0], b.Max[1]}, CenterZoom: uint8(o.MinZoom),
	}
	md := map[string]any{
		"name": l.Name, "description": l.Description, "attribution": tj.Attribution,
		"vector_layers": tj.VectorLayers, "generator": "tileapi export",
	}
	if err := w.Finish(h, md); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	return st, nil
}

// tileRange returns the corner tiles of b at zoom z: the least x and y
// (north-west) and the greatest, within the zoom's grid (maptile.At puts
// the east edge, 180°, in a column past the last).
func tileRange(b orb.Bound, z int) (lo, hi maptile.Tile) {
	zoom := maptile.Zoom(z)
	last := uint32(1)<<zoom - 1
	nw, se := maptile.At(orb.Point{b.Min[0], b.Max[1]}, zoom), maptile.At(orb.Point{b.Max[0], b.Min[1]}, zoom)
	nw.X, nw.Y = min(nw.X, last), min(nw.Y, last)
	se.X, se.Y = min(se.X, last), min(se.Y, last)
	return nw, se
}
