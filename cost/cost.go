// Package cost prices requests in quota units. It is pure arithmetic: no
// I/O, no knowledge of HTTP or of the quota store.
//
// A radius search costs in proportion to the area it searches; a tile costs
// more the lower its zoom, since it covers four times the ground of a tile
// one zoom in; a tile served from the cache costs a fraction of a rendered
// one, and a tile with nothing in it costs one unit at any zoom. Every price
// is at least one unit.
package cost

import (
	"fmt"
	"math"
)

// Model is how one plan prices requests.
type Model struct {
	// RadiusUnit is r0, the radius in metres whose search costs one unit: a
	// search of radius r costs ceil((r / r0)^2).
	RadiusUnit float64 `json:"radius_unit_m"`
	// Tiles prices a tile of each layer; a layer not listed costs Flat.
	Tiles map[string]TileModel `json:"tiles"`
	// HitDivisor divides the price of a tile served from the cache (rounded
	// up, at least one unit).
	HitDivisor int64 `json:"hit_divisor"`
	// Flat is the price of every other metered request: contains, TileJSON,
	// the catalog.
	Flat int64 `json:"flat"`
	// Settle, when set, prices the work a request actually did; the
	// request is charged its price up front and then settled down to that,
	// never up. See Work.
	Settle *WorkModel `json:"settle,omitempty"`
	// Geometry, when set, prices an answer with geometry (contains with
	// geometry=true) by its size; without it such an answer costs Flat.
	// See GeometryBytes.
	Geometry *GeometryModel `json:"geometry,omitempty"`
}

// WorkModel prices measured work: a request costs PerMS units for each
// millisecond of its query and PerFeature for each feature it returned,
// rounded up, at least one unit and never more than its price up front.
// tileapi calibrate measures one for a database.
type WorkModel struct {
	PerMS      float64 `json:"per_ms"`
	PerFeature float64 `json:"per_feature"`
}

// Work returns what the work measured costs under the model, given the
// price charged up front: ceil(PerMS*ms + PerFeature*features), at least
// one unit and at most charged. Without a model it is charged.
func (m Model) Work(charged int64, ms float64, features int) int64 {
	if m.Settle == nil {
		return charged
	}
	x := math.Ceil(m.Settle.PerMS*ms + m.Settle.PerFeature*float64(features))
	if math.IsNaN(x) || x >= float64(charged) {
		return charged
	}
	return max(1, int64(x))
}

// TileModel prices the tiles of one layer: a tile at zoom z costs
// 4^(RefZoom - z) units, the area it covers in tiles of RefZoom, at least
// one and at most Max.
type TileModel struct {
	RefZoom int   `json:"ref_zoom"`
	Max     int64 `json:"max"`
}

// Validate reports a model that would price anything below one unit or not
// at all. Every error it returns means that, and says which field is wrong;
// there is no kind to tell apart.
func (m Model) Validate() error {
	switch {
	case !(m.RadiusUnit > 0) || math.IsInf(m.RadiusUnit, 0):
		return fmt.Errorf("cost: radius_unit_m %v must be a positive number", m.RadiusUnit)
	case m.HitDivisor < 1:
		return fmt.Errorf("cost: hit_divisor %d must be at least 1", m.HitDivisor)
	case m.Flat < 1:
		return fmt.Errorf("cost: flat %d must be at least 1", m.Flat)
	}
	if w := m.Settle; w != nil && (!(w.PerMS >= 0) || !(w.PerFeature >= 0) || math.IsInf(w.PerMS, 0) || math.IsInf(w.PerFeature, 0)) {
		return fmt.Errorf("cost: settle: per_ms and per_feature must be finite and not negative")
	}
	if err := m.Geometry.validate(); err != nil {
		return err
	}
	for layer, t := range m.Tiles {
		if t.Max < 1 || t.RefZoom < 0 || t.RefZoom > 30 {
			return fmt.Errorf("cost: tiles %q: ref_zoom must be in [0, 30] and max at least 1", layer)
		}
	}
	return nil
}

// Radius returns the price of searching within r metres: ceil((r/r0)^2),
// at least 1.
func (m Model) Radius(r float64) int64 {
	x := r / m.RadiusUnit
	return max(1, int64(math.Ceil(x*x)))
}

// LargestRadius returns the largest radius, in whole metres, whose search
// costs at most budget units; 0 if none does.
func (m Model) LargestRadius(budget int64) float64 {
	if budget < 1 {
		return 0
	}
	r := math.Floor(m.RadiusUnit * math.Sqrt(float64(budget)))
	for r > 0 && m.Radius(r) > budget { // guard against rounding up
		r--
	}
	return r
}

// Tile returns the price of rendering a tile of layer at zoom z.
func (m Model) Tile(layer string, z int) int64 {
	t, ok := m.Tiles[layer]
	if !ok {
		return m.Flat
	}
	d := t.RefZoom - z
	if d <= 0 {
		return 1
	}
	if d >= 31 { // 4^31 overflows; any cap is below it
		return t.Max
	}
	return min(t.Max, int64(1)<<(2*d))
}

// EmptyTile returns the price of a tile with nothing in it, of any layer,
// at any zoom, rendered or cached: one unit, the least a request costs. A
// map asks for every tile its view covers, and at low zooms most tiles of a
// sparse layer are empty (counties outside the United States, places over
// the sea): priced by the ground they cover, they would spend a plan's
// burst on nothing. A tile is charged its price up front and settled down
// to this once it is found empty.
func (m Model) EmptyTile() int64 { return 1 }

// CachedTile returns the price of a tile served from the cache: the price
// of rendering it divided by HitDivisor, rounded up.
func (m Model) CachedTile(layer string, z int) int64 {
	miss := m.Tile(layer, z)
	return max(1, (miss+m.HitDivisor-1)/m.HitDivisor)
}

// LowestZoom returns the lowest zoom in [minZoom, maxZoom] at which a tile
// of layer costs at most budget units to render, and false if none does.
func (m Model) LowestZoom(layer string, minZoom, maxZoom int, budget int64) (int, bool) {
	for z := minZoom; z <= maxZoom; z++ {
		if m.Tile(layer, z) <= budget {
			return z, true
		}
	}
	return 0, false
}
