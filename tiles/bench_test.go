package tiles

import (
	"context"
	"fmt"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

// BenchmarkTile renders the tile over Paris (places, countries) or Los
// Angeles (counties) at zooms 2, 6, 10 and 14 where the layer has them, and
// each layer's heaviest tile on PostGIS, found by rendering every tile of
// zooms 0 to 5: places 1/0/0, countries 0/0/0, counties 5/8/12 (the eastern
// United States at the first zoom that draws full-resolution polygons).
func BenchmarkTile(b *testing.B) {
	ctx := context.Background()
	centre := map[string]orb.Point{
		"places": {2.3488, 48.85341}, "countries": {2.3488, 48.85341}, "counties": {-118.25, 34.05},
	}
	for name, r := range renderers(b) {
		for _, l := range Layers() {
			var tiles []maptile.Tile
			for _, z := range []maptile.Zoom{2, 6, 10, 14} {
				if int(z) >= l.MinZoom && int(z) <= l.MaxZoom {
					tiles = append(tiles, maptile.At(centre[l.Name], z))
				}
			}
			heaviest := map[string]maptile.Tile{
				"places": maptile.New(0, 0, 1), "countries": maptile.New(0, 0, 0), "counties": maptile.New(8, 12, 5),
			}[l.Name]
			for _, t := range append(tiles, heaviest) {
				b.Run(fmt.Sprintf("%s/%s/z%d-%d-%d", name, l.Name, t.Z, t.X, t.Y), func(b *testing.B) {
					spatialtest.Measure(b, func() error {
						_, err := r.Tile(ctx, l, t)
						return err
					})
				})
			}
		}
	}
}
