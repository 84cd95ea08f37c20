package pmtiles

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// entry is one entry of a directory: RunLength tiles from TileID on, all
// with the blob at Offset, Length bytes into the tile data; or, with
// RunLength 0, a leaf directory at Offset into the leaf directories.
type entry struct {
	TileID    uint64
	Offset    uint64
	Length    uint32
	RunLength uint32
}

// Limits on what a reader takes from an archive, so that a corrupted one
// costs an error, not the memory its numbers claim.
const (
	maxDirBytes      = 8 << 20  // a directory, compressed or not: at most 2Mi entries
	maxMetadataBytes = 16 << 20 // the metadata, compressed or not
	maxTileBytes     = 64 << 20 // a tile, compressed or not
	maxDepth         = 4        // the root and three levels of leaves
	readChunk        = 1 << 20  // see Reader.read
)

// encodeDirectory returns entries, which are sorted by TileID, as the
// specification encodes a directory (before compression): their count,
// then the deltas of their TileIDs, their RunLengths, their Lengths and
// their Offsets, each plus 1 or 0 for one right after the entry before.
func encodeDirectory(entries []entry) []byte {
	b := binary.AppendUvarint(nil, uint64(len(entries)))
	last := uint64(0)
	for _, e := range entries {
		b = binary.AppendUvarint(b, e.TileID-last)
		last = e.TileID
	}
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(e.RunLength))
	}
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(e.Length))
	}
	for i, e := range entries {
		if i > 0 && e.Offset == entries[i-1].Offset+uint64(entries[i-1].Length) {
			b = binary.AppendUvarint(b, 0)
		} else {
			b = binary.AppendUvarint(b, e.Offset+1)
		}
	}
	return b
}

// errDirectory is the error of a directory that cannot be decoded.
var errDirectory = errors.New("pmtiles: corrupt directory")

// decodeDirectory reads an uncompressed directory: at least one entry, in
// ascending TileID order, each of positive length.
func decodeDirectory(b []byte) ([]entry, error) {
	r := bytes.NewReader(b)
	next := func() (uint64, error) {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			return 0, fmt.Errorf("%w: %d bytes: %w", errDirectory, len(b), err)
		}
		return v, nil
	}
	n, err := next()
	if err != nil {
		return nil, err
	}
	// Each entry takes at least four bytes, one for each of its numbers.
	if n == 0 || n > uint64(len(b)/4) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", errDirectory, n, len(b))
	}
	entries := make([]entry, n)
	id := uint64(0)
	for i := range entries {
		d, err := next()
		if err != nil {
			return nil, err
		}
		if (i > 0 && d == 0) || d > math.MaxUint64-id {
			return nil, fmt.Errorf("%w: entry %d: tile ID not above the one before", errDirectory, i)
		}
		id += d
		entries[i].TileID = id
	}
	for i := range entries {
		v, err := next()
		if err != nil {
			return nil, err
		}
		if v > math.MaxUint32 {
			return nil, fmt.Errorf("%w: entry %d: run length %d", errDirectory, i, v)
		}
		entries[i].RunLength = uint32(v)
	}
	for i := range entries {
		v, err := next()
		if err != nil {
			return nil, err
		}
		if v == 0 || v > math.MaxUint32 {
			return nil, fmt.Errorf("%w: entry %d: length %d", errDirectory, i, v)
		}
		entries[i].Length = uint32(v)
	}
	for i := range entries {
		v, err := next()
		if err != nil {
			return nil, err
		}
		switch {
		case v > 0:
			entries[i].Offset = v - 1
		case i == 0:
			return nil, fmt.Errorf("%w: entry 0: offset after no entry", errDirectory)
		default:
			entries[i].Offset = entries[i-1].Offset + uint64(entries[i-1].Length)
		}
		if entries[i].Offset > math.MaxInt64 {
			return nil, fmt.Errorf("%w: entry %d: offset %d", errDirectory, i, entries[i].Offset)
		}
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the entries", errDirectory, r.Len())
	}
	return entries, nil
}

// find returns the entry that holds tile id: the tile entry whose run
// covers it, or the leaf directory entry that starts at or before it;
// false if there is none.
func find(entries []entry, id uint64) (entry, bool) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].TileID > id }) - 1
	if i < 0 {
		return entry{}, false
	}
	e := entries[i]
	if e.RunLength == 0 || id-e.TileID < uint64(e.RunLength) {
		return e, true
	}
	return entry{}, false
}

// decompress undoes compression c of b, refusing to produce more than
// limit bytes. None and Unknown leave b as it is, as the reference readers do.
func decompress(b []byte, c Compression, limit int) ([]byte, error) {
	switch c {
	case None, UnknownCompression:
		return b, nil
	case Gzip:
		z, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("pmtiles: gzip: %w", err)
		}
		out, err := io.ReadAll(io.LimitReader(z, int64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("pmtiles: gzip: %w", err)
		}
		if len(out) > limit {
			return nil, fmt.Errorf("pmtiles: gzip: more than %d bytes uncompressed", limit)
		}
		return out, nil
	}
	return nil, fmt.Errorf("pmtiles: %s compression is not supported", c)
}
