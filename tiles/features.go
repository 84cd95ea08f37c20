package tiles

import (
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
)

// Features renders the tiles of one layer from features held in memory
// (a GeoJSON or FlatGeobuf file), as the PostGIS table layers do: the
// features whose boxes overlap the tile plus its margin, in their order,
// at most a cap of them, clipped to the margin and simplified to the
// tile's resolution.
type Features struct {
	name        string
	maxFeatures int
	features    []*geojson.Feature // in WGS84, as given
	merc        []orb.Geometry     // in Web Mercator, within its latitude limit
	tree        rtree.RTreeGN[float64, int32]
}

var _ Source = (*Features)(nil)

// mercatorLimit bounds what can be projected to Web Mercator: just past
// its latitude limit, as the bundled fences are clipped.
var mercatorLimit = orb.Bound{Min: orb.Point{-180, -85.06}, Max: orb.Point{180, 85.06}}

// NewFeatures returns a source drawing fs, in WGS84, as the MVT layer
// name, at most maxFeatures a tile. fs must not change afterwards.
func NewFeatures(name string, fs []*geojson.Feature, maxFeatures int) *Features {
	s := &Features{name: name, maxFeatures: maxFeatures}
	for _, f := range fs {
		if f.Geometry == nil {
			continue
		}
		g := clip.Geometry(mercatorLimit, orb.Clone(f.Geometry))
		if g == nil || isEmpty(g) {
			continue // wholly beyond Web Mercator's limit: in no tile
		}
		g = project.Geometry(g, project.WGS84.ToMercator)
		b := g.Bound()
		s.tree.Insert(b.Min, b.Max, int32(len(s.features)))
		s.features = append(s.features, f)
		s.merc = append(s.merc, g)
	}
	return s
}

// Tile renders tile t; a tile with no features is empty (zero bytes).
func (s *Features) Tile(ctx context.Context, t maptile.Tile, _ Params) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tiles: %s %d/%d/%d: %w", s.name, t.Z, t.X, t.Y, err)
	}
	env, menv := envelope(t, 0), envelope(t, float64(Buffer)/Extent)
	var hits []int32
	s.tree.Search(menv.Min, menv.Max, func(_, _ [2]float64, i int32) bool {
		hits = append(hits, i)
		return true
	})
	slices.Sort(hits) // file order
	var fs []*geojson.Feature
	for _, i := range hits {
		if len(fs) == s.maxFeatures {
			break
		}
		g := tileGeometry(s.merc[i], t, env, menv)
		if g == nil {
			continue
		}
		f := geojson.NewFeature(g)
		f.ID = mvtID(s.features[i].ID)
		f.Properties = s.features[i].Properties
		fs = append(fs, f)
	}
	if len(fs) == 0 {
		return []byte{}, nil
	}
	b, err := mvt.Marshal(mvt.Layers{{Name: s.name, Version: 2, Extent: Extent, Features: fs}})
	if err != nil {
		return nil, fmt.Errorf("tiles: %s %d/%d/%d: %w", s.name, t.Z, t.X, t.Y, err)
	}
	return b, nil
}

// tileGeometry clips g (Web Mercator) to menv, simplifies it to the
// zoom's tolerance and maps it to tile units; nil if nothing is left.
func tileGeometry(g orb.Geometry, t maptile.Tile, env, menv orb.Bound) orb.Geometry {
	switch g := g.(type) {
	case orb.Point:
		if !menv.Contains(g) {
			return nil
		}
		return toTile(g, env)
	case orb.MultiPoint:
		var out orb.MultiPoint
		for _, p := range g {
			if menv.Contains(p) {
				out = append(out, toTile(p, env))
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case orb.LineString:
		return tileLines(orb.MultiLineString{g}, t, env, menv)
	case orb.MultiLineString:
		return tileLines(g, t, env, menv)
	case orb.Polygon:
		return tilePolygonsOf(orb.MultiPolygon{g}, t, env, menv)
	case orb.MultiPolygon:
		return tilePolygonsOf(g, t, env, menv)
	case orb.Collection:
		// MVT has no collections: a file's are drawn by their polygons.
		var mp orb.MultiPolygon
		for _, c := range g {
			switch c := c.(type) {
			case orb.Polygon:
				mp = append(mp, c)
			case orb.MultiPolygon:
				mp = append(mp, c...)
			}
		}
		return tilePolygonsOf(mp, t, env, menv)
	}
	return nil
}

func tileLines(mls orb.MultiLineString, t maptile.Tile, env, menv orb.Bound) orb.Geometry {
	clipped := clip.MultiLineString(menv, orb.Clone(mls).(orb.MultiLineString))
	s := simplify.DouglasPeucker(Tolerance(t.Z))
	var out orb.MultiLineString
	for _, ls := range clipped {
		ls = s.LineString(ls)
		var tl orb.LineString
		for _, p := range ls {
			q := toTile(p, env)
			if len(tl) == 0 || tl[len(tl)-1] != q {
				tl = append(tl, q)
			}
		}
		if len(tl) >= 2 {
			out = append(out, tl)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

func tilePolygonsOf(mp orb.MultiPolygon, t maptile.Tile, env, menv orb.Bound) orb.Geometry {
	g := clip.MultiPolygon(menv, orb.Clone(mp).(orb.MultiPolygon))
	g = tilePolygons(simplifyPolygons(g, Tolerance(t.Z)), env)
	if len(g) == 0 {
		return nil
	}
	return g
}

// mvtID is a feature's id as MVT carries it, an unsigned integer; nil (no
// id) for any other.
func mvtID(id any) any {
	switch v := id.(type) {
	case float64:
		if v >= 0 && v == math.Trunc(v) && v < 1<<53 {
			return uint64(v)
		}
	case int64:
		if v >= 0 {
			return uint64(v)
		}
	case int:
		if v >= 0 {
			return uint64(v)
		}
	case uint64:
		return v
	}
	return nil
}

func isEmpty(g orb.Geometry) bool {
	switch g := g.(type) {
	case orb.MultiPoint:
		return len(g) == 0
	case orb.LineString:
		return len(g) == 0
	case orb.MultiLineString:
		return len(g) == 0
	case orb.Polygon:
		return len(g) == 0
	case orb.MultiPolygon:
		return len(g) == 0
	case orb.Collection:
		return len(g) == 0
	}
	return false
}
