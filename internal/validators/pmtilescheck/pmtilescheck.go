// Package pmtilescheck reads PMTiles archives with a reader tileapi did not
// write: the pmtiles npm package (the reference implementation's), run by
// node on check.mjs beside this file.
//
// The npm packages are installed once with
//
//	npm --prefix internal/validators ci
//
// A missing node or missing packages fail the test, or skip it under
// TEST_SKIP_MISSING, as a missing server does (see testenv).
package pmtilescheck

import (
	"encoding/json"
	"testing"

	"github.com/tileapi/tileapi/internal/validators"
)

// Header is the archive's header as the library reads it.
type Header struct {
	SpecVersion         int     `json:"specVersion"`
	RootDirectoryOffset uint64  `json:"rootDirectoryOffset"`
	RootDirectoryLength uint64  `json:"rootDirectoryLength"`
	LeafDirectoryLength uint64  `json:"leafDirectoryLength"`
	TileDataLength      uint64  `json:"tileDataLength"`
	NumAddressedTiles   uint64  `json:"numAddressedTiles"`
	NumTileEntries      uint64  `json:"numTileEntries"`
	NumTileContents     uint64  `json:"numTileContents"`
	Clustered           bool    `json:"clustered"`
	InternalCompression int     `json:"internalCompression"`
	TileCompression     int     `json:"tileCompression"`
	TileType            int     `json:"tileType"`
	MinZoom             int     `json:"minZoom"`
	MaxZoom             int     `json:"maxZoom"`
	MinLon              float64 `json:"minLon"`
	MinLat              float64 `json:"minLat"`
	MaxLon              float64 `json:"maxLon"`
	MaxLat              float64 `json:"maxLat"`
	CenterZoom          int     `json:"centerZoom"`
	CenterLon           float64 `json:"centerLon"`
	CenterLat           float64 `json:"centerLat"`
}

// Tile is one tile as the library returns it.
type Tile struct {
	Z      uint8  `json:"z"`
	X      uint32 `json:"x"`
	Y      uint32 `json:"y"`
	SHA256 string `json:"sha256"` // hex, of the bytes gzip undone; "" if the archive has no such tile
	Length int    `json:"length"`
}

// Report is what check.mjs saw in an archive.
type Report struct {
	Header   Header          `json:"header"`
	Metadata json.RawMessage `json:"metadata"`
	Tiles    []Tile          `json:"tiles"`
}

// Check reads the archive at path, its header, its metadata and the tiles
// z/x/y in tiles; it fails tb if the library cannot read them.
func Check(tb testing.TB, path string, tiles [][3]uint32) Report {
	tb.Helper()
	script := validators.Script(tb, "check.mjs", "pmtiles")
	if tiles == nil {
		tiles = [][3]uint32{}
	}
	in, err := json.Marshal(tiles)
	if err != nil {
		tb.Fatal(err)
	}
	var r Report
	validators.RunJSON(tb, script, in, &r, path)
	if len(r.Tiles) != len(tiles) {
		tb.Fatalf("pmtilescheck: %d tiles read of %d", len(r.Tiles), len(tiles))
	}
	return r
}
