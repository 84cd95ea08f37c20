// Package pmtiles reads and writes PMTiles version 3 archives
// (https://github.com/protomaps/PMTiles/blob/main/spec/v3/spec.md): tiles
// addressed by a Hilbert tile ID, found through a root directory in the
// archive's first 16 KiB and leaf directories it points to.
//
// It does not use github.com/protomaps/go-pmtiles because that module's one
// package pulls the Google Cloud, Azure and AWS SDKs into every binary that
// imports it; this one needs only the standard library.
package pmtiles

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// TileType is the format of an archive's tiles.
type TileType uint8

// The tile types of the specification.
const (
	UnknownType TileType = 0
	MVT         TileType = 1 // Mapbox Vector Tile
	PNG         TileType = 2
	JPEG        TileType = 3
	WebP        TileType = 4
	AVIF        TileType = 5
	MLT         TileType = 6 // MapLibre Tile
)

// String returns the type's name in the specification's terms.
func (t TileType) String() string {
	switch t {
	case UnknownType:
		return "unknown"
	case MVT:
		return "mvt"
	case PNG:
		return "png"
	case JPEG:
		return "jpeg"
	case WebP:
		return "webp"
	case AVIF:
		return "avif"
	case MLT:
		return "mlt"
	}
	return fmt.Sprintf("TileType(%d)", uint8(t))
}

// Compression is how an archive's tiles, or its directories and metadata,
// are compressed.
type Compression uint8

// The compressions of the specification.
const (
	UnknownCompression Compression = 0
	None               Compression = 1
	Gzip               Compression = 2
	Brotli             Compression = 3
	Zstd               Compression = 4
)

// String returns the compression's name.
func (c Compression) String() string {
	switch c {
	case UnknownCompression:
		return "unknown"
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Brotli:
		return "brotli"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// Header is what an archive's header says about its tiles. Where the
// sections lie is the Reader's and the Writer's business, not the caller's.
type Header struct {
	TileType            TileType
	TileCompression     Compression // how tiles are stored; Reader.Tile undoes gzip
	InternalCompression Compression // of directories and metadata
	Clustered           bool        // tile data in tile ID order
	MinZoom, MaxZoom    uint8
	Bounds              [4]float64 // min longitude, min latitude, max longitude, max latitude
	Center              [2]float64 // longitude, latitude
	CenterZoom          uint8
	AddressedTiles      uint64 // tiles, counting each of a run; 0 if unknown
	TileEntries         uint64 // directory entries of tiles; 0 if unknown
	TileContents        uint64 // distinct tile blobs; 0 if unknown
}

// Sizes of the format.
const (
	headerLen  = 127
	rootWithin = 16384 // the header and the root directory lie in these first bytes
	magic      = "PMTiles"
	version    = 3
)

// sections is where an archive's parts lie: offsets from its first byte and
// lengths in bytes.
type sections struct {
	rootOff, rootLen         uint64
	metadataOff, metadataLen uint64
	leavesOff, leavesLen     uint64
	dataOff, dataLen         uint64
}

// ErrNotPMTiles is the error of an archive whose first bytes are not a
// PMTiles version 3 header.
var ErrNotPMTiles = errors.New("pmtiles: not a PMTiles v3 archive")

// encodeHeader returns the 127 bytes of header h with sections s.
func encodeHeader(h Header, s sections) []byte {
	b := make([]byte, 0, headerLen)
	b = append(b, magic...)
	b = append(b, version)
	for _, v := range []uint64{s.rootOff, s.rootLen, s.metadataOff, s.metadataLen, s.leavesOff, s.leavesLen,
		s.dataOff, s.dataLen, h.AddressedTiles, h.TileEntries, h.TileContents} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	clustered := byte(0)
	if h.Clustered {
		clustered = 1
	}
	b = append(b, clustered, byte(h.InternalCompression), byte(h.TileCompression), byte(h.TileType), h.MinZoom, h.MaxZoom)
	for _, v := range h.Bounds {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(math.Round(v*1e7))))
	}
	b = append(b, h.CenterZoom)
	for _, v := range h.Center {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(math.Round(v*1e7))))
	}
	return b
}

// decodeHeader reads the header in b, at least 127 bytes, and checks that
// its sections lie where offsets can reach.
func decodeHeader(b []byte) (Header, sections, error) {
	if len(b) < headerLen || string(b[:7]) != magic {
		return Header{}, sections{}, ErrNotPMTiles
	}
	if b[7] != version {
		return Header{}, sections{}, fmt.Errorf("%w: version %d", ErrNotPMTiles, b[7])
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8+8*i:]) }
	s := sections{u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7)}
	h := Header{AddressedTiles: u(8), TileEntries: u(9), TileContents: u(10)}
	h.Clustered = b[96] == 1
	h.InternalCompression, h.TileCompression, h.TileType = Compression(b[97]), Compression(b[98]), TileType(b[99])
	h.MinZoom, h.MaxZoom = b[100], b[101]
	deg := func(off int) float64 { return float64(int32(binary.LittleEndian.Uint32(b[off:]))) / 1e7 }
	h.Bounds = [4]float64{deg(102), deg(106), deg(110), deg(114)}
	h.CenterZoom = b[118]
	h.Center = [2]float64{deg(119), deg(123)}
	for _, p := range []struct {
		name     string
		off, len uint64
	}{{"root directory", s.rootOff, s.rootLen}, {"metadata", s.metadataOff, s.metadataLen},
		{"leaf directories", s.leavesOff, s.leavesLen}, {"tile data", s.dataOff, s.dataLen}} {
		if p.off > math.MaxInt64 || p.len > math.MaxInt64-p.off {
			return Header{}, sections{}, fmt.Errorf("pmtiles: header: %s at %d, %d bytes: past any archive", p.name, p.off, p.len)
		}
	}
	return h, s, nil
}
