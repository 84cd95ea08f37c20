package tiles

import (
	"context"
	"fmt"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/validators/mvtcheck"
)

// validityTiles is the tile set whose polygons TestValidTiles checks: every
// tile of countries at zooms 0 to 4, counties over the conterminous United
// States at zooms 3 to 6, and tiles where invalid rings were once reported
// (issue 21: China and the Bahamas at 0/0/0, Fiji along the buffer's edge
// at 8/255/139).
func validityTiles() map[string][]maptile.Tile {
	set := map[string][]maptile.Tile{}
	for z := maptile.Zoom(0); z <= 4; z++ {
		n := uint32(1) << z
		for x := range n {
			for y := range n {
				set["countries"] = append(set["countries"], maptile.New(x, y, z))
			}
		}
	}
	us := orb.Bound{Min: orb.Point{-125, 24}, Max: orb.Point{-66, 50}}
	for z := maptile.Zoom(3); z <= 6; z++ {
		lo, hi := maptile.At(orb.Point{us.Min[0], us.Max[1]}, z), maptile.At(orb.Point{us.Max[0], us.Min[1]}, z)
		for x := lo.X; x <= hi.X; x++ {
			for y := lo.Y; y <= hi.Y; y++ {
				set["counties"] = append(set["counties"], maptile.New(x, y, z))
			}
		}
	}
	set["countries"] = append(set["countries"], maptile.New(255, 139, 8), maptile.New(252, 140, 8), maptile.New(0, 139, 8))
	set["counties"] = append(set["counties"], maptile.New(0, 2, 3), maptile.New(7, 3, 3), maptile.New(3, 7, 4))
	return set
}

// TestValidTiles renders validityTiles with both renderers and checks every
// ring of every polygon with a decoder that is not the encoder (see package
// mvtcheck): no self-intersection or self-tangency, exterior rings of
// positive area, holes inside them, as the MVT specification requires.
func TestValidTiles(t *testing.T) {
	ctx := context.Background()
	set := validityTiles()
	for name, r := range renderers(t) {
		t.Run(name, func(t *testing.T) {
			var tiles []mvtcheck.Tile
			for _, l := range Layers() {
				for _, tile := range set[l.Name] {
					b, err := r.Tile(ctx, l, tile)
					if err != nil {
						t.Fatal(err)
					}
					tiles = append(tiles, mvtcheck.Tile{Name: fmt.Sprintf("%s-%d-%d-%d.mvt", l.Name, tile.Z, tile.X, tile.Y), Data: b})
				}
			}
			checkValid(t, tiles, 1000)
		})
	}
}

// checkValid checks tiles with mvtcheck, logs what it checked and fails t
// for every defect; at most limit are listed.
func checkValid(t *testing.T, tiles []mvtcheck.Tile, limit int) {
	t.Helper()
	rep := mvtcheck.Check(t, tiles)
	bad := map[string]bool{}
	for i, d := range rep.Defects {
		bad[d.Tile] = true
		if i < limit {
			t.Error(d)
		}
	}
	t.Logf("%d tiles, %d features, %d polygons, %d rings checked: %d defects in %d rings of %d tiles",
		rep.Tiles, rep.Features, rep.Polygons, rep.Rings, len(rep.Defects), rep.BadRings(), len(bad))
	if rep.Rings == 0 {
		t.Error("no ring was checked")
	}
}
