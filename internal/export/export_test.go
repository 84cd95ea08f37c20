package export

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pmtiles"
	"github.com/tileapi/tileapi/tiles"
)

func pointLayer() tiles.Layer {
	var fs []*geojson.Feature
	for i, p := range []orb.Point{{2.35, 48.85}, {-74.0, 40.7}, {179.9, -16.5}} {
		f := geojson.NewFeature(p)
		f.ID = float64(i + 1)
		fs = append(fs, f)
	}
	return tiles.Layer{Name: "pts", MinZoom: 0, MaxZoom: 14, MaxFeatures: 10, Source: tiles.NewFeatures("pts", fs, 10)}
}

// Every tile of the zooms over the area is rendered, the empty ones left
// out, and the archive holds the rest as the layer draws them.
func TestArchive(t *testing.T) {
	ctx := context.Background()
	l := pointLayer()
	var buf bytes.Buffer
	w, err := pmtiles.NewWriter(&buf, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var last, total int
	st, err := Archive(ctx, l, Options{MinZoom: 0, MaxZoom: 3, Progress: func(d, n int) { last, total = d, n }}, w)
	if err != nil {
		t.Fatal(err)
	}
	// 1 + 4 + 16 + 64 tiles over the world.
	if total != 85 || last != 85 || st.Tiles+st.Empty != 85 {
		t.Errorf("progress %d/%d, stats %+v", last, total, st)
	}
	drawn := 0
	r, err := pmtiles.Open(ctx, readerAt{bytes.NewReader(buf.Bytes())})
	if err != nil {
		t.Fatal(err)
	}
	for z := 0; z <= 3; z++ {
		n := uint32(1) << z
		for x := range n {
			for y := range n {
				tl := maptile.New(x, y, maptile.Zoom(z))
				want, err := l.Tile(ctx, tl, tiles.Params{})
				if err != nil {
					t.Fatal(err)
				}
				got, ok, err := r.Tile(ctx, uint8(z), x, y)
				if err != nil || ok != (len(want) > 0) || !bytes.Equal(got, want) {
					t.Fatalf("tile %v: %d bytes (%v, %v), the layer draws %d", tl, len(got), ok, err, len(want))
				}
				if ok {
					drawn++
				}
			}
		}
	}
	if drawn != st.Tiles || drawn < 4 {
		t.Errorf("the archive holds %d tiles, Archive says it wrote %d", drawn, st.Tiles)
	}
}

func TestArchiveRefuses(t *testing.T) {
	ctx := context.Background()
	l := pointLayer()
	params := l
	params.Params = []layers.Param{{Name: "y", Type: layers.Integer}}
	for _, tc := range []struct {
		name string
		l    tiles.Layer
		o    Options
		want string
	}{
		{"zooms outside the layer's", l, Options{MinZoom: 0, MaxZoom: 15}, "not within layer pts's 0-14"},
		{"inverted zooms", l, Options{MinZoom: 5, MaxZoom: 2}, "not within"},
		{"a function layer's parameters", params, Options{MaxZoom: 1}, "takes parameters"},
		{"too many tiles", l, Options{MinZoom: 0, MaxZoom: 12}, "more than 5000000 tiles"},
		{"nothing to write", l, Options{MinZoom: 5, MaxZoom: 5, Bounds: orb.Bound{Min: orb.Point{10, 10}, Max: orb.Point{11, 11}}}, "every tile is empty"},
	} {
		w, err := pmtiles.NewWriter(&bytes.Buffer{}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Archive(ctx, tc.l, tc.o, w); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		w.Close()
	}
}

// The corner tiles of an area stay within the zoom's grid, 180° east and
// the Mercator limit included.
func TestTileRange(t *testing.T) {
	world := orb.Bound{Min: orb.Point{-180, -tiles.MaxLatitude}, Max: orb.Point{180, tiles.MaxLatitude}}
	for z := range 6 {
		lo, hi := tileRange(world, z)
		last := uint32(1)<<z - 1
		if lo.X != 0 || lo.Y != 0 || hi.X != last || hi.Y != last {
			t.Errorf("zoom %d: %v to %v", z, lo, hi)
		}
	}
}

type readerAt struct{ r *bytes.Reader }

func (s readerAt) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return s.r.ReadAt(p, off)
}
