package pmtiles

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// testTile is a tile to write; empty data is an empty tile.
type testTile struct {
	z    uint8
	x, y uint32
	data []byte
}

// pyramid returns every tile of zooms 0 to maxZ. Most hold random bytes of
// random lengths (so that directories compress poorly and need leaves
// sooner); one column in five holds the same "sea" tile, so that some
// contents repeat and some repeat along consecutive IDs; one tile in seven
// is empty.
func pyramid(maxZ uint8) []testTile {
	var tiles []testTile
	for z := uint8(0); z <= maxZ; z++ {
		for x := uint32(0); x < 1<<z; x++ {
			for y := uint32(0); y < 1<<z; y++ {
				t := testTile{z: z, x: x, y: y}
				rng := rand.New(rand.NewPCG(uint64(z), uint64(x)<<32|uint64(y)))
				switch {
				case (x+2*y)%7 == 3:
				case x%5 == 0:
					t.data = []byte("sea")
				default:
					t.data = make([]byte, 1+rng.IntN(100))
					for i := range t.data {
						t.data[i] = byte(rng.Uint32())
					}
				}
				tiles = append(tiles, t)
			}
		}
	}
	return tiles
}

// testHeader is the header the tests write.
var testHeader = Header{
	TileType: MVT, MinZoom: 0, MaxZoom: 8,
	Bounds: [4]float64{-12.5, -45.25, 33.125, 60.0625}, Center: [2]float64{1.5, 2.25}, CenterZoom: 3,
}

// write returns the archive of tiles, added in a shuffled order, with
// header h and metadata meta; tune, if not nil, changes the Writer first.
func write(tb testing.TB, tiles []testTile, h Header, meta any, tune func(*Writer)) []byte {
	tb.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	if tune != nil {
		tune(w)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, i := range rng.Perm(len(tiles)) {
		t := tiles[i]
		if err := w.AddTile(t.z, t.x, t.y, t.data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Finish(h, meta); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// smallLeaves makes a Writer put at most 4 entries in its root and 8 in a
// leaf: leaves with a few tiles.
func smallLeaves(w *Writer) { w.rootLimit, w.leafMin = headerLen+60, 8 }

func openBytes(b []byte) (*Reader, error) {
	return Open(context.Background(), readerAt{bytes.NewReader(b)})
}

// readAll checks that r returns every tile of tiles as written, and no
// tile for the empty ones.
func readAll(t *testing.T, r *Reader, tiles []testTile) {
	t.Helper()
	for _, tile := range tiles {
		got, ok, err := r.Tile(context.Background(), tile.z, tile.x, tile.y)
		if err != nil || ok != (len(tile.data) > 0) || !bytes.Equal(got, tile.data) {
			t.Fatalf("Tile(%d, %d, %d) = %.20q, %v, %v; want %.20q", tile.z, tile.x, tile.y, got, ok, err, tile.data)
		}
	}
}

// walk returns the tile entries of r's directories in order, leaves
// followed.
func walk(t testing.TB, r *Reader) []entry {
	var tiles []entry
	var visit func(dir []entry, depth int)
	visit = func(dir []entry, depth int) {
		for _, e := range dir {
			if e.RunLength > 0 {
				tiles = append(tiles, e)
				continue
			}
			leaf, err := r.leaf(context.Background(), e)
			if err != nil || depth == maxDepth {
				t.Fatalf("leaf at %d: %v (depth %d)", e.Offset, err, depth)
			}
			visit(leaf, depth+1)
		}
	}
	visit(r.root, 1)
	return tiles
}

func TestRoundTrip(t *testing.T) {
	big := make([]byte, 5<<20) // read in chunks of 1, 1, 2 and 1 MiB
	rand.NewChaCha8([32]byte{5}).Read(big)
	for _, tc := range []struct {
		name   string
		maxZ   uint8
		tune   func(*Writer)
		leaves bool
		big    bool // tile 1/1/1 is 5 MiB
	}{
		{"root only", 3, nil, false, false},
		{"small leaves", 4, smallLeaves, true, false},
		// With 16 KiB of header and root, 87,381 tiles need leaves.
		{"zooms 0 to 8", 8, nil, true, false},
		{"a tile of 5 MiB", 1, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tiles := pyramid(tc.maxZ)
			if tc.big {
				tiles[4].data = big
			}
			h := testHeader
			h.MaxZoom = tc.maxZ
			meta := map[string]any{"name": "test", "vector_layers": []any{map[string]any{"id": "a", "fields": map[string]any{}}}}
			b := write(t, tiles, h, meta, tc.tune)
			r, err := openBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			if r.sec.rootOff+r.sec.rootLen > rootWithin {
				t.Errorf("root directory ends at %d, past %d", r.sec.rootOff+r.sec.rootLen, rootWithin)
			}
			if got := r.sec.leavesLen > 0; got != tc.leaves {
				t.Errorf("leaf directories: %v, want %v", got, tc.leaves)
			}
			readAll(t, r, tiles)
			// The second read finds the leaves in the cache.
			readAll(t, r, tiles)

			want := h
			want.Clustered, want.InternalCompression, want.TileCompression = true, Gzip, Gzip
			contents := map[string]bool{}
			for _, tile := range tiles {
				if len(tile.data) > 0 {
					want.AddressedTiles++
					contents[string(tile.data)] = true
				}
			}
			want.TileContents = uint64(len(contents))
			entries := walk(t, r)
			want.TileEntries = uint64(len(entries))
			if got := r.Header(); got != want {
				t.Errorf("header\n%+v, want\n%+v", got, want)
			}
			if want.TileEntries >= want.AddressedTiles {
				t.Errorf("%d entries for %d tiles: no runs", want.TileEntries, want.AddressedTiles)
			}
			// Clustered: each blob starts where the one before ended, or
			// repeats one before it.
			next := uint64(0)
			for _, e := range entries {
				if e.Offset > next {
					t.Fatalf("tile %d at offset %d, past %d", e.TileID, e.Offset, next)
				}
				next = max(next, e.Offset+uint64(e.Length))
			}
			if next != r.sec.dataLen {
				t.Errorf("tile data ends at %d, header says %d", next, r.sec.dataLen)
			}

			got, err := r.Metadata(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if wantMeta, _ := json.Marshal(meta); !bytes.Equal(got, wantMeta) {
				t.Errorf("metadata %s, want %s", got, wantMeta)
			}
			// Outside the archive's zooms, and between its tiles.
			for _, z := range []uint8{tc.maxZ + 1, MaxZoom} {
				if _, ok, err := r.Tile(context.Background(), z, 0, 0); ok || err != nil {
					t.Errorf("Tile(%d, 0, 0) = %v, %v; want no tile", z, ok, err)
				}
			}
			if _, _, err := r.Tile(context.Background(), 2, 4, 0); err == nil {
				t.Error("Tile(2, 4, 0): no error")
			}
		})
	}
}

// TestOpenFile reads an archive tippecanoe wrote (see testdata/README.md):
// what the reference implementation's tests assert of it.
func TestOpenFile(t *testing.T) {
	r, err := OpenFile(context.Background(), filepath.Join("testdata", "tippecanoe.pmtiles"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := Header{
		TileType: MVT, TileCompression: Gzip, InternalCompression: Gzip,
		Bounds:         [4]float64{0, 0, 0.9999999, 1},
		AddressedTiles: 1, TileEntries: 1, TileContents: 1,
	}
	if got := r.Header(); got != want {
		t.Errorf("header\n%+v, want\n%+v", got, want)
	}
	tile, ok, err := r.Tile(context.Background(), 0, 0, 0)
	// An MVT layer (field 3, bytes) named test_fixture_1pmtiles.
	if err != nil || !ok || len(tile) != 49 || !bytes.HasPrefix(tile, []byte("\x1a/x\x02\n\x15test_fixture_1pmtiles")) {
		t.Errorf("Tile(0, 0, 0) = %q, %v, %v", tile, ok, err)
	}
	meta, err := r.Metadata(context.Background())
	if err != nil || !bytes.Contains(meta, []byte(`"generator": "tippecanoe v2.5.0"`)) {
		t.Errorf("Metadata = %s, %v", meta, err)
	}
	if _, err := OpenFile(context.Background(), filepath.Join("testdata", "README.md")); err == nil {
		t.Error("OpenFile(README.md): no error")
	}
}

func TestWriterErrors(t *testing.T) {
	one := []testTile{{3, 1, 2, []byte("a")}}
	for _, tc := range []struct {
		name  string
		tiles []testTile
		h     Header
		meta  any
		want  string
	}{
		{"not a tile", []testTile{{3, 8, 0, []byte("a")}}, testHeader, nil, "pmtiles: add tile 3/8/0: not a tile"},
		{"twice", append(one, one[0]), testHeader, nil, "pmtiles: tile 3/1/2 added twice"},
		{"no tiles", nil, testHeader, nil, "pmtiles: no tiles added (a directory holds at least one)"},
		{"only empty tiles", []testTile{{1, 0, 0, nil}}, testHeader, nil, "pmtiles: no tiles added (a directory holds at least one)"},
		{"zoom past MaxZoom", one, Header{MaxZoom: 2}, nil, "pmtiles: header: zooms 0 to 2 do not cover the tiles added, of zooms 3 to 3"},
		{"zoom below MinZoom", one, Header{MinZoom: 4, MaxZoom: 5}, nil, "pmtiles: header: zooms 4 to 5 do not cover the tiles added, of zooms 3 to 3"},
		{"zooms reversed", one, Header{MinZoom: 5, MaxZoom: 4}, nil, "pmtiles: header: zooms 5 to 4 (want MinZoom <= MaxZoom <= 31)"},
		{"bounds reversed", one, Header{MaxZoom: 5, Bounds: [4]float64{10, 0, 5, 1}}, nil, "pmtiles: header: bounds [10 0 5 1] (want min lng, min lat, max lng, max lat within -180, -90, 180, 90)"},
		{"latitude past 90", one, Header{MaxZoom: 5, Bounds: [4]float64{0, 0, 5, 91}}, nil, "pmtiles: header: bounds [0 0 5 91] (want min lng, min lat, max lng, max lat within -180, -90, 180, 90)"},
		{"center", one, Header{MaxZoom: 5, Center: [2]float64{200, 0}}, nil, "pmtiles: header: center [200 0] (want lng, lat within -180, -90, 180, 90)"},
		{"metadata array", one, testHeader, []int{1}, "pmtiles: metadata: [1] is not a JSON object"},
		{"metadata unencodable", one, testHeader, map[string]any{"f": func() {}}, "pmtiles: metadata: json: unsupported type: func()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWriter(&bytes.Buffer{}, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for _, tile := range tc.tiles {
				if err = w.AddTile(tile.z, tile.x, tile.y, tile.data); err != nil {
					break
				}
			}
			if err == nil {
				err = w.Finish(tc.h, tc.meta)
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}

// TestWriterDefaults checks the bounds and center a Writer fills in, and
// that it takes nothing after Finish.
func TestWriterDefaults(t *testing.T) {
	var out bytes.Buffer
	w, err := NewWriter(&out, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddTile(0, 0, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(Header{TileType: MVT}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTile(0, 0, 0, []byte("x")); err != errFinished {
		t.Errorf("AddTile after Finish: %v", err)
	}
	if err := w.Finish(Header{}, nil); err != errFinished {
		t.Errorf("Finish after Finish: %v", err)
	}
	r, err := openBytes(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Bounds != [4]float64{-180, -85.0511288, 180, 85.0511288} || h.Center != [2]float64{} {
		t.Errorf("bounds %v, center %v", h.Bounds, h.Center)
	}
	if meta, err := r.Metadata(context.Background()); err != nil || string(meta) != "{}" {
		t.Errorf("Metadata = %s, %v", meta, err)
	}
}

func TestDirCache(t *testing.T) {
	c := dirCache{max: 10}
	dir := func(n int) []entry { return make([]entry, n) }
	c.put(1, dir(4))
	c.put(2, dir(4))
	c.get(1) // 2 is now the one used longest ago
	c.put(3, dir(4))
	c.put(4, dir(11)) // larger than the whole cache
	for off, want := range map[uint64]bool{1: true, 2: false, 3: true, 4: false} {
		if _, ok := c.get(off); ok != want {
			t.Errorf("get(%d): %v, want %v", off, ok, want)
		}
	}
	if c.size != 8 || c.order.Len() != 2 {
		t.Errorf("size %d in %d directories, want 8 in 2", c.size, c.order.Len())
	}
}

// TestConcurrent reads the tiles of an archive with leaves from several
// goroutines through a cache too small for the leaves, so that they are
// dropped and read again while other goroutines use them (go test -race).
func TestConcurrent(t *testing.T) {
	tiles := pyramid(5)
	h := testHeader
	h.MaxZoom = 5
	r, err := openBytes(write(t, tiles, h, nil, smallLeaves))
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.leaf(context.Background(), r.root[0])
	if err != nil {
		t.Fatal(err)
	}
	r.leaves.max = 2*len(first) + 1 // about two leaves
	errs := make(chan error, 4)
	for g := range cap(errs) {
		go func() {
			for i := range tiles {
				tile := tiles[(i*7+g*101)%len(tiles)]
				got, ok, err := r.Tile(context.Background(), tile.z, tile.x, tile.y)
				if err != nil || ok != (len(tile.data) > 0) || !bytes.Equal(got, tile.data) {
					errs <- fmt.Errorf("Tile(%d, %d, %d) = %.20q, %v, %v; want %.20q", tile.z, tile.x, tile.y, got, ok, err, tile.data)
					return
				}
			}
			errs <- nil
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if r.leaves.size > r.leaves.max || r.leaves.order.Len() < 1 || len(r.root) < 4 {
		t.Errorf("cache of %d entries in %d leaves, over %d, of %d", r.leaves.size, r.leaves.order.Len(), r.leaves.max, len(r.root))
	}
}
