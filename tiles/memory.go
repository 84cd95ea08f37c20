package tiles

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/clip"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/maptile"
	"github.com/paulmach/orb/project"
	"github.com/paulmach/orb/simplify"
	"github.com/tidwall/rtree"

	"github.com/tileapi/tileapi/internal/dataset"
)

// Memory renders tiles with orb from a dataset held in memory, following the
// steps of the PostGIS renderer: the same envelopes, the same candidates
// (by bounding box in Web Mercator), order and cap, clipping to the margin
// and simplification to the tile's resolution.
type Memory struct {
	places    []dataset.Place
	placeTree rtree.RTreeGN[float64, int32] // Web Mercator points
	fences    map[dataset.Kind]*fenceIndex
}

// fenceIndex holds the fences of one kind, by id, in Web Mercator: in full
// and simplified to the tolerance of lowZoom.
type fenceIndex struct {
	fences []dataset.Fence
	merc   []orb.MultiPolygon
	low    []orb.MultiPolygon
	tree   rtree.RTreeGN[float64, int32]
}

// NewMemory projects and indexes d, which must not change afterwards.
func NewMemory(d *dataset.Dataset) *Memory {
	m := &Memory{places: d.Places, fences: map[dataset.Kind]*fenceIndex{}}
	for i, p := range d.Places {
		// As in the places table: no point beyond Web Mercator's limit.
		if math.Abs(p.Point[1]) < MaxLatitude {
			mp := project.WGS84.ToMercator(p.Point)
			m.placeTree.Insert(mp, mp, int32(i))
		}
	}
	// As in the fences table: clipped just past the limit, then projected.
	limit := orb.Bound{Min: orb.Point{-180, -85.06}, Max: orb.Point{180, 85.06}}
	for _, f := range d.Fences {
		idx := m.fences[f.Kind]
		if idx == nil {
			idx = &fenceIndex{}
			m.fences[f.Kind] = idx
		}
		merc := project.MultiPolygon(clip.MultiPolygon(limit, orb.Clone(f.Geometry).(orb.MultiPolygon)), project.WGS84.ToMercator)
		if len(merc) == 0 {
			continue // wholly beyond Web Mercator's limit: in no tile
		}
		b := merc.Bound()
		idx.tree.Insert(b.Min, b.Max, int32(len(idx.fences)))
		idx.fences = append(idx.fences, f)
		idx.merc = append(idx.merc, merc)
		idx.low = append(idx.low, simplifyPolygons(orb.Clone(merc).(orb.MultiPolygon), Tolerance(lowZoom)))
	}
	return m
}

// Tile renders tile t of layer l as an MVT; a tile with no features is
// empty (zero bytes).
func (m *Memory) Tile(ctx context.Context, l Layer, t maptile.Tile) ([]byte, error) {
	if err := l.Validate(t); err != nil {
		return nil, fmt.Errorf("tiles: %s: %w", l.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tiles: %s %d/%d/%d: %w", l.Name, t.Z, t.X, t.Y, err)
	}
	env, menv := envelope(t, 0), envelope(t, float64(Buffer)/Extent)
	var fs []*geojson.Feature
	if l.kind == "" {
		fs = m.placeFeatures(l, t, env, menv)
	} else if idx := m.fences[l.kind]; idx != nil {
		fs = idx.features(l, t, env, menv)
	}
	if len(fs) == 0 {
		return []byte{}, nil
	}
	b, err := mvt.Marshal(mvt.Layers{{Name: l.Name, Version: 2, Extent: Extent, Features: fs}})
	if err != nil {
		return nil, fmt.Errorf("tiles: %s %d/%d/%d: %w", l.Name, t.Z, t.X, t.Y, err)
	}
	return b, nil
}

// placeFeatures draws the most populous places in menv, as placesSQL does.
func (m *Memory) placeFeatures(l Layer, t maptile.Tile, env, menv orb.Bound) []*geojson.Feature {
	type hit struct {
		place *dataset.Place
		merc  orb.Point
	}
	var hits []hit
	minPop := l.MinPopulation(int(t.Z))
	m.placeTree.Search(menv.Min, menv.Max, func(p, _ [2]float64, i int32) bool {
		if pl := &m.places[i]; pl.Population >= minPop {
			hits = append(hits, hit{pl, p})
		}
		return true
	})
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(b.place.Population, a.place.Population), cmp.Compare(a.place.ID, b.place.ID))
	})
	fs := make([]*geojson.Feature, 0, min(len(hits), l.MaxFeatures))
	for _, h := range hits[:min(len(hits), l.MaxFeatures)] {
		f := geojson.NewFeature(toTile(h.merc, env))
		f.ID = uint64(h.place.ID)
		f.Properties = h.place.Properties()
		fs = append(fs, f)
	}
	return fs
}

// features draws the fences whose boxes overlap menv, as fencesSQL does.
func (idx *fenceIndex) features(l Layer, t maptile.Tile, env, menv orb.Bound) []*geojson.Feature {
	var hits []int32
	idx.tree.Search(menv.Min, menv.Max, func(_, _ [2]float64, i int32) bool {
		hits = append(hits, i)
		return true
	})
	slices.Sort(hits) // fences are in id order
	geoms := idx.merc
	if t.Z <= lowZoom {
		geoms = idx.low
	}
	var fs []*geojson.Feature
	for _, i := range hits[:min(len(hits), l.MaxFeatures)] {
		g := clip.MultiPolygon(menv, orb.Clone(geoms[i]).(orb.MultiPolygon))
		g = tilePolygons(simplifyPolygons(g, Tolerance(t.Z)), env)
		if len(g) == 0 {
			continue
		}
		f := geojson.NewFeature(g)
		f.ID = uint64(idx.fences[i].ID)
		f.Properties = idx.fences[i].Properties()
		fs = append(fs, f)
	}
	return fs
}

// simplifyPolygons simplifies mp in place by Douglas-Peucker with the
// tolerance, and drops the rings left with fewer than four points, and the
// polygons whose exterior ring went, as ST_Simplify does.
func simplifyPolygons(mp orb.MultiPolygon, tolerance float64) orb.MultiPolygon {
	s := simplify.DouglasPeucker(tolerance)
	out := mp[:0]
	for _, p := range mp {
		rings := p[:0]
		for i, r := range p {
			r = s.Ring(r)
			if len(r) < 4 {
				if i == 0 {
					break
				}
				continue
			}
			rings = append(rings, r)
		}
		if len(rings) > 0 {
			out = append(out, rings)
		}
	}
	return out
}

// envelope is ST_TileEnvelope(z, x, y, margin => margin): the tile's box in
// Web Mercator grown by margin tile widths on each side, clamped to the
// world in y (and in x where it would be wider than the world).
func envelope(t maptile.Tile, margin float64) orb.Bound {
	size := 2 * worldHalf / math.Exp2(float64(t.Z))
	x, y := float64(t.X), float64(t.Y)
	b := orb.Bound{
		Min: orb.Point{-worldHalf + size*(x-margin), max(worldHalf-size*(y+1+margin), -worldHalf)},
		Max: orb.Point{-worldHalf + size*(x+1+margin), min(worldHalf-size*(y-margin), worldHalf)},
	}
	if b.Max[0]-b.Min[0] > 2*worldHalf {
		b.Min[0], b.Max[0] = -worldHalf, worldHalf
	}
	return b
}

// toTile maps a Web Mercator point to tile units, y down, on the integer
// grid, as ST_AsMVTGeom does.
func toTile(p orb.Point, env orb.Bound) orb.Point {
	return orb.Point{
		math.RoundToEven((p[0] - env.Min[0]) * Extent / (env.Max[0] - env.Min[0])),
		math.RoundToEven((env.Max[1] - p[1]) * Extent / (env.Max[1] - env.Min[1])),
	}
}

// tilePolygons maps polygons to tile units and drops the rings that
// collapse on the integer grid; exterior rings are wound with positive area
// in tile units and holes the other way, and polygons left invalid by
// clipping, simplification or the grid are repaired, as the MVT
// specification requires.
func tilePolygons(mp orb.MultiPolygon, env orb.Bound) orb.MultiPolygon {
	var out orb.MultiPolygon
	var segs []segment
	for _, p := range mp {
		var tp orb.Polygon
		for i, r := range p {
			tr := make(orb.Ring, 0, len(r))
			for _, pt := range r {
				q := toTile(pt, env)
				if len(tr) == 0 || tr[len(tr)-1] != q {
					tr = append(tr, q)
				}
			}
			var o orb.Orientation // zero for a ring with no area
			if len(tr) >= 4 {
				o = tr.Orientation()
			}
			if o == 0 {
				if i == 0 {
					break // the exterior collapsed: so does the polygon
				}
				continue
			}
			if (i == 0) != (o == orb.CCW) { // exteriors CCW in tile units, holes CW
				tr.Reverse()
			}
			tp = append(tp, tr)
		}
		if len(tp) > 0 {
			out = append(out, repair(tp, &segs)...)
		}
	}
	return out
}
