package pmtiles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tileapi/tileapi/internal/validators/pmtilescheck"
)

// TestReferenceReader reads archives the Writer wrote with the reference
// implementation's reader (the pmtiles npm package, through pmtilescheck):
// it must see the header written and, for every tile, the bytes added, or
// no tile for an empty one or one outside the archive's zooms.
func TestReferenceReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxZ   uint8
		tune   func(*Writer)
		leaves bool
	}{
		{"root only", 3, nil, false},
		{"small leaves", 4, smallLeaves, true},
		{"zooms 0 to 8", 8, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tiles := pyramid(tc.maxZ)
			h := testHeader
			h.MaxZoom = tc.maxZ
			meta := map[string]any{"name": tc.name, "vector_layers": []any{map[string]any{"id": "a", "fields": map[string]any{}}}}
			b := write(t, tiles, h, meta, tc.tune)
			path := filepath.Join(t.TempDir(), "archive.pmtiles")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := openBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.sec.leavesLen > 0; got != tc.leaves {
				t.Fatalf("leaf directories: %v, want %v", got, tc.leaves)
			}

			asked := append(tiles, testTile{z: tc.maxZ + 1}, testTile{z: tc.maxZ + 1, x: 1})
			zxy := make([][3]uint32, len(asked))
			for i, tile := range asked {
				zxy[i] = [3]uint32{uint32(tile.z), tile.x, tile.y}
			}
			rep := pmtilescheck.Check(t, path, zxy)

			got := r.Header()
			want := pmtilescheck.Header{
				SpecVersion: 3, RootDirectoryOffset: r.sec.rootOff, RootDirectoryLength: r.sec.rootLen,
				LeafDirectoryLength: r.sec.leavesLen, TileDataLength: r.sec.dataLen,
				NumAddressedTiles: got.AddressedTiles, NumTileEntries: got.TileEntries, NumTileContents: got.TileContents,
				Clustered: true, InternalCompression: int(Gzip), TileCompression: int(Gzip), TileType: int(MVT),
				MinZoom: int(h.MinZoom), MaxZoom: int(h.MaxZoom),
				MinLon: h.Bounds[0], MinLat: h.Bounds[1], MaxLon: h.Bounds[2], MaxLat: h.Bounds[3],
				CenterZoom: int(h.CenterZoom), CenterLon: h.Center[0], CenterLat: h.Center[1],
			}
			if rep.Header != want {
				t.Errorf("the reference reads the header\n%+v, want\n%+v", rep.Header, want)
			}
			var gotMeta any
			wantMeta, _ := json.Marshal(meta)
			json.Unmarshal(wantMeta, &meta)
			if err := json.Unmarshal(rep.Metadata, &gotMeta); err != nil || !reflect.DeepEqual(gotMeta, meta) {
				t.Errorf("the reference reads the metadata %s, want %s", rep.Metadata, wantMeta)
			}
			for i, tile := range asked {
				want := pmtilescheck.Tile{Z: tile.z, X: tile.x, Y: tile.y, Length: len(tile.data)}
				if len(tile.data) > 0 {
					sum := sha256.Sum256(tile.data)
					want.SHA256 = hex.EncodeToString(sum[:])
				}
				if rep.Tiles[i] != want {
					t.Fatalf("the reference reads tile %+v, want %+v", rep.Tiles[i], want)
				}
			}
		})
	}
}
