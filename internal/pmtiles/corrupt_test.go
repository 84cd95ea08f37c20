package pmtiles

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// parts are the sections of an archive crafted by hand, uncompressed
// unless a case says otherwise.
type parts struct {
	h                        Header
	root, meta, leaves, data []byte
	edit                     func(*sections) // changes the sections laid out in order
	z                        uint8           // the tile read
	x, y                     uint32
}

// craft returns the archive of p: the header, then the root directory,
// metadata, leaf directories and tile data, each right after the one before.
func craft(p parts) []byte {
	var s sections
	off := uint64(headerLen)
	for _, sec := range []struct {
		off, len *uint64
		b        []byte
	}{{&s.rootOff, &s.rootLen, p.root}, {&s.metadataOff, &s.metadataLen, p.meta},
		{&s.leavesOff, &s.leavesLen, p.leaves}, {&s.dataOff, &s.dataLen, p.data}} {
		*sec.off, *sec.len = off, uint64(len(sec.b))
		off += uint64(len(sec.b))
	}
	if p.edit != nil {
		p.edit(&s)
	}
	return bytes.Join([][]byte{encodeHeader(p.h, s), p.root, p.meta, p.leaves, p.data}, nil)
}

// plain is a valid archive of one tile, 0/0/0, nothing compressed.
func plain() parts {
	return parts{
		h:    Header{InternalCompression: None, TileCompression: None, TileType: MVT},
		root: encodeDirectory([]entry{{TileID: 0, Offset: 0, Length: 4, RunLength: 1}}),
		meta: []byte("{}"), data: []byte("tile"),
	}
}

// first returns the first error of opening b and reading the tile of p and
// the metadata.
func first(b []byte, p parts) error {
	r, err := openBytes(b)
	if err != nil {
		return err
	}
	if _, _, err := r.Tile(context.Background(), p.z, p.x, p.y); err != nil {
		return err
	}
	_, err = r.Metadata(context.Background())
	return err
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(b)
	z.Close()
	return buf.Bytes()
}

func TestCorrupt(t *testing.T) {
	if err := first(craft(plain()), plain()); err != nil {
		t.Fatalf("the valid archive: %v", err)
	}
	leaf := func(e ...entry) []byte { return encodeDirectory(e) }
	for _, tc := range []struct {
		name string
		p    func(p *parts)
		b    func(b []byte) []byte // changes the archive's bytes
		want string
	}{
		{"empty file", nil, func([]byte) []byte { return nil }, "pmtiles: not a PMTiles v3 archive"},
		{"magic", nil, func(b []byte) []byte { b[0] = 'p'; return b }, "pmtiles: not a PMTiles v3 archive"},
		{"version 2", nil, func(b []byte) []byte { b[7] = 2; return b }, "pmtiles: not a PMTiles v3 archive: version 2"},
		{"header cut short", nil, func(b []byte) []byte { return b[:100] }, "pmtiles: not a PMTiles v3 archive"},
		{"header only", nil, func(b []byte) []byte { return b[:headerLen] }, "pmtiles: read root directory at 127, 5 bytes: unexpected EOF"},
		{"root length 1 TiB", func(p *parts) { p.edit = func(s *sections) { s.rootLen = 1 << 40 } }, nil,
			"pmtiles: root directory of 1099511627776 bytes (want 1 to 8388608)"},
		{"root length 0", func(p *parts) { p.edit = func(s *sections) { s.rootLen = 0 } }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: 0 bytes: EOF"},
		{"offset past int64", func(p *parts) { p.edit = func(s *sections) { s.metadataOff = math.MaxUint64 - 2 } }, nil,
			"pmtiles: header: metadata at 18446744073709551613, 2 bytes: past any archive"},
		{"brotli tiles", func(p *parts) { p.h.TileCompression = Brotli }, nil,
			"pmtiles: tile compression brotli is not supported (only gzip or none)"},
		{"zstd directories", func(p *parts) { p.h.InternalCompression = Zstd }, nil,
			"pmtiles: internal compression zstd is not supported (only gzip or none)"},
		{"directories not gzip", func(p *parts) { p.h.InternalCompression = Gzip }, nil,
			"pmtiles: root directory: pmtiles: gzip: unexpected EOF"},
		{"2^60 entries", func(p *parts) { p.root = binary.AppendUvarint(nil, 1<<60) }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: 1152921504606846976 entries in 9 bytes"},
		{"no entries", func(p *parts) { p.root = []byte{0, 0, 0, 0} }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: 0 entries in 4 bytes"},
		{"entries cut short", func(p *parts) { p.root = []byte{1, 0, 1, 4} }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: 4 bytes: EOF"},
		{"repeated tile ID", func(p *parts) { p.root = []byte{2, 0, 0, 1, 1, 4, 4, 1, 0} }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: entry 1: tile ID not above the one before"},
		{"tile ID past 2^64", func(p *parts) {
			p.root = binary.AppendUvarint([]byte{2, 1}, math.MaxUint64)
			p.root = append(p.root, 1, 1, 4, 4, 1, 0)
		}, nil, "pmtiles: root directory: pmtiles: corrupt directory: entry 1: tile ID not above the one before"},
		{"length 0", func(p *parts) { p.root = []byte{1, 0, 1, 0, 1} }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: entry 0: length 0"},
		{"first offset relative", func(p *parts) { p.root = []byte{1, 0, 1, 4, 0} }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: entry 0: offset after no entry"},
		{"bytes after the entries", func(p *parts) { p.root = append(p.root, 7) }, nil,
			"pmtiles: root directory: pmtiles: corrupt directory: 1 bytes after the entries"},
		{"tile past the tile data", func(p *parts) { p.root = encodeDirectory([]entry{{0, 1, 4, 1}}) }, nil,
			"pmtiles: tile at 1, 4 bytes: past the tile data's 4 (tile 0/0/0)"},
		{"tile of 2 GiB", func(p *parts) {
			p.root = encodeDirectory([]entry{{0, 0, 1 << 31, 1}})
			p.edit = func(s *sections) { s.dataLen = 1 << 32 }
		}, nil, "pmtiles: tile of 2147483648 bytes (want 1 to 67108864) (tile 0/0/0)"},
		{"tile data cut short", nil, func(b []byte) []byte { return b[:len(b)-1] },
			"pmtiles: read tile at 134, 4 bytes: unexpected EOF (tile 0/0/0)"},
		{"tile not gzip", func(p *parts) { p.h.TileCompression = Gzip }, nil, "pmtiles: gzip: unexpected EOF (tile 0/0/0)"},
		{"tile gzip bomb", func(p *parts) {
			p.h.TileCompression = Gzip
			p.data = gzipped(make([]byte, maxTileBytes+1))
			p.root = encodeDirectory([]entry{{0, 0, uint32(len(p.data)), 1}})
		}, nil, "pmtiles: gzip: more than 67108864 bytes uncompressed (tile 0/0/0)"},
		{"leaf past the leaves", func(p *parts) { p.root = encodeDirectory([]entry{{0, 0, 5, 0}}) }, nil,
			"pmtiles: leaf directory at 0, 5 bytes: past the leaf directories' 0 (tile 0/0/0)"},
		{"leaf pointing to itself", func(p *parts) {
			p.leaves = leaf(entry{0, 0, 5, 0})
			p.root = encodeDirectory([]entry{{0, 0, 5, 0}})
		}, nil, "pmtiles: tile 0/0/0: more than 4 levels of directories"},
		{"leaf corrupt", func(p *parts) {
			p.leaves = []byte{9, 9, 9, 9, 9}
			p.root = encodeDirectory([]entry{{0, 0, 5, 0}})
		}, nil, "pmtiles: leaf directory at 0: pmtiles: corrupt directory: 9 entries in 5 bytes (tile 0/0/0)"},
		{"metadata not JSON", func(p *parts) { p.meta = []byte("{x") }, nil, `pmtiles: metadata: not JSON: "{x"`},
		{"metadata of 1 TiB", func(p *parts) { p.edit = func(s *sections) { s.metadataLen = 1 << 40 } }, nil,
			"pmtiles: metadata of 1099511627776 bytes (want 1 to 16777216)"},
		{"metadata past the end", func(p *parts) { p.edit = func(s *sections) { s.metadataOff = 1 << 20 } }, nil,
			"pmtiles: read metadata at 1048576, 2 bytes: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plain()
			if tc.p != nil {
				tc.p(&p)
			}
			b := craft(p)
			if tc.b != nil {
				b = tc.b(b)
			}
			err := first(b, p)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}

// TestClaimedLength reads a tile whose entry claims 60 MiB of an archive
// of a few bytes: the error costs the memory of the bytes there are, not
// of those claimed.
func TestClaimedLength(t *testing.T) {
	p := plain()
	p.root = encodeDirectory([]entry{{0, 0, 60 << 20, 1}})
	p.edit = func(s *sections) { s.dataLen = 60 << 20 }
	r, err := openBytes(craft(p))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err = r.Tile(context.Background(), 0, 0, 0)
	runtime.ReadMemStats(&after)
	if want := "pmtiles: read tile at 137, 62914560 bytes: unexpected EOF (tile 0/0/0)"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*readChunk {
		t.Errorf("%d bytes allocated", got)
	}
}

// TestTruncated cuts an archive with leaves at every length short of its
// own: each must fail to open or to read a tile or the metadata.
func TestTruncated(t *testing.T) {
	tiles := pyramid(2)
	h := testHeader
	h.MaxZoom = 2
	b := write(t, tiles, h, map[string]string{"name": "t"}, smallLeaves)
	for n := range len(b) {
		r, err := openBytes(b[:n])
		if err != nil {
			continue
		}
		_, err = r.Metadata(context.Background())
		for _, tile := range tiles {
			if _, _, tileErr := r.Tile(context.Background(), tile.z, tile.x, tile.y); tileErr != nil {
				err = errors.Join(err, tileErr)
			}
		}
		if err == nil {
			t.Fatalf("cut to %d bytes of %d: no error", n, len(b))
		}
		if !strings.Contains(err.Error(), "unexpected EOF") {
			t.Errorf("cut to %d bytes of %d: %v", n, len(b), err)
		}
	}
}

// FuzzTile opens archives and reads a tile, the metadata and the tiles
// that the root directory's entries start: errors, never a panic. The
// seeds are archives a Writer wrote (one with leaves), one tippecanoe
// wrote, and archives crafted by hand.
func FuzzTile(f *testing.F) {
	h := testHeader
	h.MaxZoom = 2
	f.Add(write(f, pyramid(1), h, nil, nil), uint8(1), uint32(1), uint32(0))
	f.Add(write(f, pyramid(2), h, map[string]int{"a": 1}, smallLeaves), uint8(2), uint32(2), uint32(2))
	fixture, err := os.ReadFile(filepath.Join("testdata", "tippecanoe.pmtiles"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture, uint8(0), uint32(0), uint32(0))
	f.Add(craft(plain()), uint8(0), uint32(0), uint32(0))
	p := plain()
	p.leaves = encodeDirectory([]entry{{0, 0, 4, 1}})
	p.root = encodeDirectory([]entry{{0, 0, uint32(len(p.leaves)), 0}})
	f.Add(craft(p), uint8(0), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, z uint8, x, y uint32) {
		r, err := openBytes(b)
		if err != nil {
			return
		}
		ctx := context.Background()
		r.Metadata(ctx)
		r.Tile(ctx, z, x, y)
		for _, e := range r.root[:min(len(r.root), 64)] {
			if z, x, y := IDToZXY(e.TileID); ValidZXY(z, x, y) {
				r.Tile(ctx, z, x, y)
			}
		}
	})
}
