package cost

import (
	"fmt"
	"math"
)

// GeometryModel prices an answer that carries geometry by its size: the
// outline of a country can be hundreds of kilobytes (Canada's, 443 KiB)
// where a tile of one unit at zoom 10 is about 2.6 KiB. Its size is known
// only once the answer is made, so the request is charged Max up front, an
// upper bound the plan must admit, and settled down to the price of the
// bytes it returned (Model.GeometryBound, Model.GeometryBytes).
type GeometryModel struct {
	// UnitBytes is how many bytes of answer one unit buys.
	UnitBytes int64 `json:"unit_bytes"`
	// Max is the most an answer costs, and what is charged up front.
	Max int64 `json:"max"`
}

func (g *GeometryModel) validate() error {
	if g != nil && (g.UnitBytes < 1 || g.Max < 1) {
		return fmt.Errorf("cost: geometry: unit_bytes and max must be at least 1")
	}
	return nil
}

// GeometryBound returns the price charged up front for an answer with
// geometry: Geometry.Max (at least Flat), or Flat without a model, where
// geometry costs what any other request does.
func (m Model) GeometryBound() int64 {
	if m.Geometry == nil {
		return m.Flat
	}
	return max(m.Flat, m.Geometry.Max)
}

// GeometryBytes returns the price of an answer with geometry of n bytes:
// ceil(n / UnitBytes), at least Flat and at most GeometryBound; Flat
// without a model.
func (m Model) GeometryBytes(n int) int64 {
	if m.Geometry == nil {
		return m.Flat
	}
	units := int64(math.MaxInt64)
	if n >= 0 {
		units = ceilDiv(int64(n), m.Geometry.UnitBytes)
	}
	return min(max(m.Flat, units), m.GeometryBound())
}

func ceilDiv(a, b int64) int64 { return a/b + min(a%b, 1) }
