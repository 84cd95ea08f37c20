package geofence

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/planar"
	"github.com/tidwall/rtree"

	"github.com/tileapi/tileapi/internal/dataset"
)

// Memory answers queries from a dataset held in memory, through R-trees over
// the places and over each polygon of the fences. Distances are geodesic on
// the WGS84 ellipsoid and the order is PostGIS's (that distance, then id),
// so its answers match PostGIS's. Its geometries are the dataset's, which
// winds them as RFC 7946 wants.
type Memory struct {
	places    []dataset.Place
	placeTree rtree.RTreeGN[float64, int32]
	fences    []dataset.Fence
	fenceTree rtree.RTreeGN[float64, polygonRef]
}

// polygonRef is the entry of one polygon of a fence in the R-tree.
type polygonRef struct {
	fence, polygon int32
}

// NewMemory indexes d, which must not change afterwards.
func NewMemory(d *dataset.Dataset) *Memory {
	m := &Memory{places: d.Places, fences: d.Fences}
	for i, p := range d.Places {
		m.placeTree.Insert(p.Point, p.Point, int32(i))
	}
	for i, f := range d.Fences {
		for j, poly := range f.Geometry {
			b := poly.Bound()
			m.fenceTree.Insert(b.Min, b.Max, polygonRef{int32(i), int32(j)})
		}
	}
	return m
}

// Within returns the places within q.Radius metres of q's point, nearest
// first, at most q.Limit of them.
func (m *Memory) Within(ctx context.Context, q WithinQuery) ([]Near, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("geofence: within: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("geofence: within: %w", err)
	}
	c := orb.Point{q.Lng, q.Lat}
	var ns []Near
	for _, b := range q.Bounds() {
		m.placeTree.Search(b.Min, b.Max, func(_, _ [2]float64, i int32) bool {
			p := m.places[i]
			if d := spheroidDistance(c, p.Point); d <= q.Radius {
				ns = append(ns, Near{Place: p, Distance: d})
			}
			return true
		})
	}
	slices.SortFunc(ns, func(a, b Near) int {
		return cmp.Or(cmp.Compare(a.Distance, b.Distance), cmp.Compare(a.ID, b.ID))
	})
	return ns[:min(len(ns), q.Limit)], nil
}

// Contains returns the fences that contain q's point, countries first, then
// by id. Returned geometries are shared with the dataset and must not be
// modified.
func (m *Memory) Contains(ctx context.Context, q ContainsQuery) ([]dataset.Fence, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("geofence: contains: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("geofence: contains: %w", err)
	}
	pt := orb.Point{q.Lng, q.Lat}
	var fs []dataset.Fence
	m.fenceTree.Search(pt, pt, func(_, _ [2]float64, ref polygonRef) bool {
		f := m.fences[ref.fence]
		if planar.PolygonContains(f.Geometry[ref.polygon], pt) &&
			!slices.ContainsFunc(fs, func(g dataset.Fence) bool { return g.Kind == f.Kind && g.ID == f.ID }) {
			if !q.Geometry {
				f.Geometry = nil
			}
			fs = append(fs, f)
		}
		return true
	})
	slices.SortFunc(fs, func(a, b dataset.Fence) int {
		return cmp.Or(strings.Compare(string(a.Kind), string(b.Kind)), cmp.Compare(a.ID, b.ID))
	})
	return fs, nil
}
