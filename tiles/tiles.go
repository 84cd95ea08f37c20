// Package tiles renders Mapbox Vector Tiles of a catalog of layers and
// describes them as TileJSON. A layer's Source draws it: the bundled places
// and fences (this package's PostGIS and Memory renderers), or the
// operator's own data (tables, functions, archives and files, opened by
// the packages that read them).
//
// The bundled layers:
// Each layer has a zoom range and a cap on features per tile. Places are
// thinned by population at low zoom and the most populous are kept first;
// polygons are clipped to the tile plus a margin and simplified to the
// tile's resolution (see simplifyUnits). Feature ids are the dataset's ids (geonameid, our
// country id, FIPS) and the MVT layer is named after the layer.
//
// Two renderers have the same method: PostGIS (ST_AsMVT) and Memory (orb),
// checked against each other by a differential test. An invalid layer or
// tile is reported as a *param.Error naming "layer", "z", "x" or "y".
package tiles

import (
	"context"
	"math"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/param"
)

// Tile geometry and media type.
const (
	// Extent is the size of a tile in tile units: coordinates inside the
	// tile run over [0, Extent).
	Extent = 4096
	// Buffer is how many tile units features reach beyond the tile on every
	// side, so that symbols and strokes crossing an edge render on both
	// tiles. The tile queries read a margin of Buffer/Extent around the tile.
	Buffer = 256
	// MediaType is the Content-Type of a rendered tile.
	MediaType = "application/vnd.mapbox-vector-tile"
)

// worldHalf is half the width of the Web Mercator world in metres: the
// world runs over [-worldHalf, worldHalf] on both axes.
const worldHalf = 20037508.342789244

// renderer is the method set both implementations share.
type renderer interface {
	Tile(ctx context.Context, l Layer, t maptile.Tile) ([]byte, error)
}

var (
	_ renderer = (*PostGIS)(nil)
	_ renderer = (*Memory)(nil)
)

// Layer is one tile layer: what it is called and holds, and the Source
// that renders it.
type Layer struct {
	Name        string
	Description string
	// Attribution is the data's attribution, for TileJSON; "" for the
	// bundled dataset's.
	Attribution string
	MinZoom     int
	MaxZoom     int
	MaxFeatures int               // per tile, where the source caps them
	Fields      map[string]string // property name to its type or a description, for TileJSON
	// Bounds is the area the layer covers, [west, south, east, north] in
	// degrees; the zero value is the whole Web Mercator world.
	Bounds [4]float64
	// VectorLayers describe the MVT layers of its tiles where they are
	// not one layer named after it with Fields (a PMTiles archive's own).
	VectorLayers []VectorLayer
	// Params are the query parameters it takes (function layers).
	Params []layers.Param
	// Source renders its tiles.
	Source Source

	kind dataset.Kind // the bundled fences' kind; "" for places
}

// MinPopulation is the smallest population of a place drawn at zoom z,
// which thins the places layer at low zoom; zero for the other layers.
func (l Layer) MinPopulation(z int) int64 {
	switch {
	case l.kind != "" || z >= 10:
		return 0
	case z >= 8:
		return 5_000
	case z == 7:
		return 15_000
	case z == 6:
		return 25_000
	case z == 5:
		return 50_000
	case z == 4:
		return 100_000
	case z == 3:
		return 250_000
	case z == 2:
		return 500_000
	}
	return 1_000_000
}

// Layers returns the bundled layers, in catalog order, without a Source:
// see Bundled.
func Layers() []Layer {
	fences := map[string]string{
		"name": "String: the name",
		"kind": "String: country or county",
		"code": "String: ISO 3166-1 numeric code (countries, where known) or 5-digit FIPS code (counties)",
	}
	return []Layer{
		{
			Name:        "places",
			Description: "Populated places from GeoNames, the most populous first; feature id is the geonameid",
			MinZoom:     0, MaxZoom: 14, MaxFeatures: 1000,
			Fields: map[string]string{
				"name":         "String: the name",
				"country":      "String: ISO 3166-1 alpha-2 country code",
				"admin_code":   "String: first-level administrative division code",
				"feature_code": "String: GeoNames feature code",
				"population":   "Number: population",
			},
		},
		{
			Name:        "countries",
			Description: "Countries from Natural Earth 1:50m; feature id is tileapi's country id",
			MinZoom:     0, MaxZoom: 10, MaxFeatures: 300,
			Fields: fences, kind: dataset.Country,
		},
		{
			Name:        "counties",
			Description: "US counties from the Census Bureau 1:10m; feature id is the FIPS code",
			MinZoom:     3, MaxZoom: 14, MaxFeatures: 4000,
			Fields: fences, kind: dataset.County,
		},
	}
}

// LayerNames returns the names of the bundled layers, in catalog order.
func LayerNames() []string {
	ls := Layers()
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return names
}

// LookupLayer returns the bundled layer called name, or a *param.Error for
// "layer".
func LookupLayer(name string) (Layer, error) {
	for _, l := range Layers() {
		if l.Name == name {
			return l, nil
		}
	}
	return Layer{}, param.Invalid("layer", "unknown layer %q", name)
}

// parseTile reads z/x/y from the text of a request path, each number in the
// strict syntax of param.Int, and validates them.
func (l Layer) parseTile(z, x, y string) (maptile.Tile, error) {
	var v [3]int64
	for i, c := range []struct{ name, s string }{{"z", z}, {"x", x}, {"y", y}} {
		var err error
		if v[i], err = param.Int(c.name, c.s); err != nil {
			return maptile.Tile{}, err
		}
	}
	// Checked before the tile is made: a maptile.Tile would truncate them.
	if err := l.check(v[0], v[1], v[2]); err != nil {
		return maptile.Tile{}, err
	}
	return maptile.New(uint32(v[1]), uint32(v[2]), maptile.Zoom(v[0])), nil
}

// Validate returns a *param.Error if t is outside the layer's zoom range or
// its x or y is outside [0, 2^z).
func (l Layer) Validate(t maptile.Tile) error {
	return l.check(int64(t.Z), int64(t.X), int64(t.Y))
}

func (l Layer) check(z, x, y int64) error {
	if z < int64(l.MinZoom) || z > int64(l.MaxZoom) {
		return param.Invalid("z", "must be in [%d, %d] for layer %s", l.MinZoom, l.MaxZoom, l.Name)
	}
	n := int64(1) << z // z <= MaxZoom, far below 63
	if x < 0 || x >= n {
		return param.Invalid("x", "must be in [0, %d) at zoom %d", n, z)
	}
	if y < 0 || y >= n {
		return param.Invalid("y", "must be in [0, %d) at zoom %d", n, z)
	}
	return nil
}

// lowZoom is the highest zoom whose tiles draw fences from a copy simplified
// in advance to that zoom's tolerance (see migration 00002).
const lowZoom = 4

// simplifyUnits is the tolerance, in tile units, to which polygons are
// simplified: 4 of the tile's 4096 is half a pixel of the tile drawn at 512
// pixels, its size on a high-density screen. Finer detail costs time to clip
// and validate (a world tile of countries takes twice as long at 1 unit) and
// cannot be seen.
const simplifyUnits = 4

// Tolerance is the simplification tolerance in Web Mercator metres at zoom
// z: simplifyUnits tile units. Every PostGIS layer simplifies its lines and
// polygons to it.
func Tolerance(z maptile.Zoom) float64 {
	return simplifyUnits * 2 * worldHalf / math.Exp2(float64(z)) / Extent
}
