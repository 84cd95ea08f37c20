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
	// Tiles prices a tile of each layer it names, and of every other layer
	// by its "*" entry (AnyLayer). Where it is given, a layer it neither
	// names nor covers with "*" is not sold (SellsLayer); without it, every
	// tile costs Flat.
	Tiles map[string]TileModel `json:"tiles"`
	// Sets prices the geofence sets it names, and every other set by its
	// "*" entry; where it is given, a set it neither names nor covers with
	// "*" is not sold (ForSet). Without it, every set is priced by
	// RadiusUnit and Flat.
	Sets map[string]SetModel `json:"sets,omitempty"`
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

// AnyLayer is the key of Model.Tiles and Model.Sets that prices every
// layer or set the map does not name.
const AnyLayer = "*"

// SetModel prices the questions asked of one geofence set: a zero field
// takes the plan's own (Model.RadiusUnit, Model.Flat).
type SetModel struct {
	// RadiusUnit is the radius in metres whose within search costs one
	// unit.
	RadiusUnit float64 `json:"radius_unit_m,omitempty"`
	// Flat is the price of a contains question.
	Flat int64 `json:"flat,omitempty"`
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
	for set, sm := range m.Sets {
		if !(sm.RadiusUnit >= 0) || math.IsInf(sm.RadiusUnit, 0) || sm.Flat < 0 {
			return fmt.Errorf("cost: sets %q: radius_unit_m must be a positive number and flat at least 1 (or absent for the plan's)", set)
		}
	}
	return nil
}

// SellsLayer reports whether the model prices tiles of layer: every layer
// without Tiles; with it, a layer it names or covers with "*".
func (m Model) SellsLayer(layer string) bool {
	if m.Tiles == nil {
		return true
	}
	_, named := m.Tiles[layer]
	_, wild := m.Tiles[AnyLayer]
	return named || wild
}

// tileModel returns the model of layer's tiles, and false where its tiles
// cost Flat.
func (m Model) tileModel(layer string) (TileModel, bool) {
	if t, ok := m.Tiles[layer]; ok {
		return t, true
	}
	t, ok := m.Tiles[AnyLayer]
	return t, ok
}

// ForSet returns the model that prices the questions asked of the
// geofence set: m with the set's RadiusUnit and Flat, and false if the
// model does not sell the set.
func (m Model) ForSet(set string) (Model, bool) {
	if m.Sets == nil {
		return m, true
	}
	sm, ok := m.Sets[set]
	if !ok {
		if sm, ok = m.Sets[AnyLayer]; !ok {
			return Model{}, false
		}
	}
	if sm.RadiusUnit > 0 {
		m.RadiusUnit = sm.RadiusUnit
	}
	if sm.Flat > 0 {
		m.Flat = sm.Flat
	}
	return m, true
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

// Tile returns the price of rendering a tile of layer at zoom z: by the
// layer's model (or "*"'s), else Flat.
func (m Model) Tile(layer string, z int) int64 {
	t, ok := m.tileModel(layer)
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
