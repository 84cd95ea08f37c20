package tiles

import (
	"github.com/tileapi/tileapi/internal/dataset"
)

// TileJSON is a TileJSON 3.0.0 document describing one layer.
type TileJSON struct {
	TileJSON     string        `json:"tilejson"`
	Name         string        `json:"name"`
	Description  string        `json:"description"`
	Attribution  string        `json:"attribution"`
	Scheme       string        `json:"scheme"`
	Tiles        []string      `json:"tiles"`
	MinZoom      int           `json:"minzoom"`
	MaxZoom      int           `json:"maxzoom"`
	Bounds       [4]float64    `json:"bounds"`
	VectorLayers []VectorLayer `json:"vector_layers"`
}

// VectorLayer describes the MVT layer of a tile set in TileJSON.
type VectorLayer struct {
	ID          string            `json:"id"`
	Description string            `json:"description"`
	MinZoom     int               `json:"minzoom"`
	MaxZoom     int               `json:"maxzoom"`
	Fields      map[string]string `json:"fields"`
}

// MaxLatitude is the latitude limit of Web Mercator, in degrees.
const MaxLatitude = 85.0511287798066

// TileJSON describes the layer; tileURL is the URL template of its tiles,
// with {z}, {x} and {y}, such as https://example.com/tiles/places/{z}/{x}/{y}.mvt.
func (l Layer) TileJSON(tileURL string) TileJSON {
	tj := TileJSON{
		TileJSON:     "3.0.0",
		Name:         l.Name,
		Description:  l.Description,
		Attribution:  l.Attribution,
		Scheme:       "xyz",
		Tiles:        []string{tileURL},
		MinZoom:      l.MinZoom,
		MaxZoom:      l.MaxZoom,
		Bounds:       l.Bounds,
		VectorLayers: l.VectorLayers,
	}
	if l.Source == nil || isBundled(l.Source) {
		tj.Attribution = dataset.Attribution
	}
	if tj.Bounds == ([4]float64{}) {
		tj.Bounds = [4]float64{-180, -MaxLatitude, 180, MaxLatitude}
	}
	if tj.VectorLayers == nil {
		fields := l.Fields
		if fields == nil {
			fields = map[string]string{}
		}
		tj.VectorLayers = []VectorLayer{{
			ID: l.Name, Description: l.Description, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom, Fields: fields,
		}}
	}
	return tj
}

func isBundled(s Source) bool {
	_, ok := s.(bundledSource)
	return ok
}

// CatalogEntry lists one layer in the catalog.
type CatalogEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	MinZoom     int    `json:"minzoom"`
	MaxZoom     int    `json:"maxzoom"`
	TileJSON    string `json:"tilejson"`
}
