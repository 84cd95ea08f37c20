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
// each layer's heaviest tile: the whole world, or the whole United States.
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
			heaviest := maptile.New(0, 0, 0)
			if l.Name == "counties" {
				heaviest = maptile.New(1, 3, 3)
			}
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
