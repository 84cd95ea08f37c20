package tiles

import (
	"strings"

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

// maxLat is the latitude limit of Web Mercator.
const maxLat = 85.0511287798066

// TileJSON describes the layer; tileURL is the URL template of its tiles,
// with {z}, {x} and {y}, such as https://example.com/tiles/places/{z}/{x}/{y}.mvt.
func (l Layer) TileJSON(tileURL string) TileJSON {
	return TileJSON{
		TileJSON:    "3.0.0",
		Name:        l.Name,
		Description: l.Description,
		Attribution: dataset.Attribution,
		Scheme:      "xyz",
		Tiles:       []string{tileURL},
		MinZoom:     l.MinZoom,
		MaxZoom:     l.MaxZoom,
		Bounds:      [4]float64{-180, -maxLat, 180, maxLat},
		VectorLayers: []VectorLayer{{
			ID: l.Name, Description: l.Description, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom, Fields: l.Fields,
		}},
	}
}

// CatalogEntry lists one layer in the catalog.
type CatalogEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	MinZoom     int    `json:"minzoom"`
	MaxZoom     int    `json:"maxzoom"`
	TileJSON    string `json:"tilejson"`
}

// Catalog lists every layer; tileJSONURL is the URL template of a layer's
// TileJSON, in which {layer} stands for the layer's name.
func Catalog(tileJSONURL string) []CatalogEntry {
	var c []CatalogEntry
	for _, l := range Layers() {
		c = append(c, CatalogEntry{
			Name: l.Name, Description: l.Description, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom,
			TileJSON: strings.ReplaceAll(tileJSONURL, "{layer}", l.Name),
		})
	}
	return c
}
