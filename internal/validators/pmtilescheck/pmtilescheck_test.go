package pmtilescheck_test

import (
	"encoding/json"
	"testing"

	"github.com/tileapi/tileapi/internal/validators/pmtilescheck"
)

// TestCheck reads an archive tippecanoe wrote (see
// internal/pmtiles/testdata/README.md) and compares what the library sees
// with what the reference implementation's own tests assert of it, and with
// the tile's bytes gunzipped by hand from offsets 399 to 468.
func TestCheck(t *testing.T) {
	r := pmtilescheck.Check(t, "../../pmtiles/testdata/tippecanoe.pmtiles", [][3]uint32{{0, 0, 0}, {1, 0, 0}})
	want := pmtilescheck.Header{
		SpecVersion: 3, RootDirectoryOffset: 127, RootDirectoryLength: 25, TileDataLength: 69,
		NumAddressedTiles: 1, NumTileEntries: 1, NumTileContents: 1,
		InternalCompression: 2, TileCompression: 2, TileType: 1,
		MaxLon: 0.9999999, MaxLat: 1, // center 0, 0 at zoom 0
	}
	if r.Header != want {
		t.Errorf("header\n%+v, want\n%+v", r.Header, want)
	}
	var meta struct {
		Generator    string `json:"generator"`
		VectorLayers []struct {
			ID string `json:"id"`
		} `json:"vector_layers"`
	}
	if err := json.Unmarshal(r.Metadata, &meta); err != nil || meta.Generator != "tippecanoe v2.5.0" ||
		len(meta.VectorLayers) != 1 || meta.VectorLayers[0].ID != "test_fixture_1pmtiles" {
		t.Errorf("metadata %s (%v)", r.Metadata, err)
	}
	wantTiles := []pmtilescheck.Tile{
		{Z: 0, X: 0, Y: 0, SHA256: "9b25c6726af16561c00725a7a99eccde9104abbf727a27efde77005ceddcc79f", Length: 49},
		{Z: 1, X: 0, Y: 0},
	}
	for i, tile := range r.Tiles {
		if tile != wantTiles[i] {
			t.Errorf("tile %+v, want %+v", tile, wantTiles[i])
		}
	}
}
