package tiles

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/maptile"
	"github.com/paulmach/orb/planar"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/validators/mvtcheck"
)

// randomTile returns a tile of l at a random zoom in its range: around a
// random place (so that most tiles have features), anywhere, or on the
// antimeridian or polar edges of the map.
func randomTile(rng *rand.Rand, l Layer, d *dataset.Dataset, us []dataset.Place) (string, maptile.Tile) {
	z := maptile.Zoom(l.MinZoom + rng.IntN(l.MaxZoom-l.MinZoom+1))
	n := uint32(1) << z
	switch rng.IntN(6) {
	case 0:
		return "anywhere", maptile.New(rng.Uint32N(n), rng.Uint32N(n), z)
	case 1:
		return "antimeridian", maptile.New([]uint32{0, n - 1}[rng.IntN(2)], rng.Uint32N(n), z)
	case 2:
		return "polar", maptile.New(rng.Uint32N(n), []uint32{0, n - 1}[rng.IntN(2)], z)
	}
	places := d.Places
	if l.kind == dataset.County {
		places = us
	}
	p := places[rng.IntN(len(places))].Point
	return "at a place", maptile.At(orb.Point{p[0], max(min(p[1], 85), -85)}, z)
}

// TestDifferentialTiles renders random tiles of every layer with both
// renderers, decodes them, checks that every geometry lies within the tile
// and its buffer, and requires the same feature ids: for places always, for
// polygons where neither renderer reached the layer's cap. The exception is
// a sliver: a polygon whose every part, where one renderer draws it, is
// narrower on average (2 x area / perimeter) than the simplification
// tolerance, such as a county clipped to a thin strip along the buffer's
// edge. The engines clip, snap, simplify and validate differently at that
// scale (GEOS and wagyu in PostGIS, orb here), so a sliver may vanish in one
// and not the other. Slivers are counted and logged. Every tile of both
// renderers is also checked for valid polygons, as TestValidTiles does.
func TestDifferentialTiles(t *testing.T) {
	ctx := context.Background()
	r := renderers(t)
	pg, mem := r["postgis"], r["memory"]
	_, d := spatialtest.Loaded(t)
	var us []dataset.Place
	for _, p := range d.Places {
		if p.Country == "US" {
			us = append(us, p)
		}
	}
	seed := uint64(20261130)
	rng := rand.New(rand.NewPCG(seed, 3))
	const perLayer = 200
	for _, l := range Layers() {
		t.Run(l.Name, func(t *testing.T) {
			nonEmpty, features, slivers := 0, 0, 0
			rendered := map[string][]mvtcheck.Tile{}
			for i := range perLayer {
				kind, tile := randomTile(rng, l, d, us)
				name := fmt.Sprintf("tile %d (%s, seed %d) %d/%d/%d", i, kind, seed, tile.Z, tile.X, tile.Y)
				wb, err := pg.Tile(ctx, l, tile)
				if err != nil {
					t.Fatalf("%s: postgis: %v", name, err)
				}
				gb, err := mem.Tile(ctx, l, tile)
				if err != nil {
					t.Fatalf("%s: memory: %v", name, err)
				}
				file := fmt.Sprintf("%s-%d-%d-%d-%d.mvt", l.Name, i, tile.Z, tile.X, tile.Y)
				rendered["postgis"] = append(rendered["postgis"], mvtcheck.Tile{Name: file, Data: wb})
				rendered["memory"] = append(rendered["memory"], mvtcheck.Tile{Name: file, Data: gb})
				want, got := decode(t, l, wb), decode(t, l, gb)
				if len(want) > 0 {
					nonEmpty++
				}
				features += len(want)
				if len(want) >= l.MaxFeatures || len(got) >= l.MaxFeatures && l.kind != "" {
					continue
				}
				for _, diff := range []struct {
					renderer  string
					has, lack map[uint64]orb.Geometry
				}{{"postgis", want, got}, {"memory", got, want}} {
					for id, g := range diff.has {
						if diff.lack[id] != nil {
							continue
						}
						if l.kind == "" || !sliver(g) {
							t.Errorf("%s: only %s draws %d: %v", name, diff.renderer, id, g.Bound())
							continue
						}
						slivers++
						t.Logf("%s: only %s draws %d, a sliver: %v", name, diff.renderer, id, g)
					}
				}
			}
			t.Logf("%d tiles, %d with features, %d features, %d slivers drawn by one renderer only",
				perLayer, nonEmpty, features, slivers)
			if nonEmpty < perLayer/3 {
				t.Errorf("only %d of %d tiles have features", nonEmpty, perLayer)
			}
			if l.kind == "" {
				return // points: no rings to check
			}
			for _, name := range []string{"postgis", "memory"} {
				t.Run("valid "+name, func(t *testing.T) { checkValid(t, rendered[name], 50) })
			}
		})
	}
}

// sliver reports whether every polygon of g is narrower on average than the
// simplification tolerance.
func sliver(g orb.Geometry) bool {
	var mp orb.MultiPolygon
	switch g := g.(type) {
	case orb.Polygon:
		mp = orb.MultiPolygon{g}
	case orb.MultiPolygon:
		mp = g
	default:
		return false
	}
	for _, p := range mp {
		perimeter := 0.0
		for _, r := range p {
			perimeter += planar.Length(r)
		}
		if 2*planar.Area(p)/perimeter >= simplifyUnits {
			return false
		}
	}
	return true
}
