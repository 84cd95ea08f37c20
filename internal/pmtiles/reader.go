package pmtiles

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
)

// Source is where a Reader reads an archive's bytes. It must be safe for
// concurrent use.
type Source interface {
	// ReadAt reads len(p) bytes at off into p as io.ReaderAt does: fewer
	// only with an error, which is io.EOF at the end of the archive.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
}

// Reader reads the tiles of one archive. It keeps the root directory and
// the leaf directories it used last, up to about a million entries
// (24 MiB). It is safe for concurrent use.
type Reader struct {
	src    Source
	header Header
	sec    sections
	root   []entry
	leaves dirCache
}

// Open reads the header and the root directory of the archive src holds,
// in one read of its first 16 KiB.
func Open(ctx context.Context, src Source) (*Reader, error) {
	b := make([]byte, rootWithin)
	n, err := src.ReadAt(ctx, b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("pmtiles: read header: %w", err)
	}
	h, s, err := decodeHeader(b[:n])
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		what string
		c    Compression
	}{{"internal", h.InternalCompression}, {"tile", h.TileCompression}} {
		if c.c != None && c.c != UnknownCompression && c.c != Gzip {
			return nil, fmt.Errorf("pmtiles: %s compression %s is not supported (only gzip or none)", c.what, c.c)
		}
	}
	r := &Reader{src: src, header: h, sec: s, leaves: dirCache{max: 1 << 20}}
	var raw []byte
	if s.rootOff+s.rootLen <= uint64(n) {
		raw = b[s.rootOff : s.rootOff+s.rootLen]
	} else if raw, err = r.read(ctx, "root directory", s.rootOff, s.rootLen, maxDirBytes); err != nil {
		return nil, err
	}
	if r.root, err = r.directory(raw); err != nil {
		return nil, fmt.Errorf("pmtiles: root directory: %w", err)
	}
	return r, nil
}

// OpenFile opens the archive in the file at path; Close closes the file.
func OpenFile(ctx context.Context, path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pmtiles: %w", err)
	}
	r, err := Open(ctx, readerAt{f})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return r, nil
}

// readerAt is a Source over an io.ReaderAt such as an *os.File.
type readerAt struct{ io.ReaderAt }

func (s readerAt) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.ReaderAt.ReadAt(p, off)
}

func (s readerAt) Close() error {
	if c, ok := s.ReaderAt.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Close closes the source if it is an io.Closer.
func (r *Reader) Close() error {
	if c, ok := r.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Header returns the archive's header.
func (r *Reader) Header() Header { return r.header }

// Metadata returns the archive's JSON metadata, uncompressed. It reads it
// from the source on each call.
func (r *Reader) Metadata(ctx context.Context) (json.RawMessage, error) {
	b, err := r.read(ctx, "metadata", r.sec.metadataOff, r.sec.metadataLen, maxMetadataBytes)
	if err != nil {
		return nil, err
	}
	if b, err = decompress(b, r.header.InternalCompression, maxMetadataBytes); err != nil {
		return nil, fmt.Errorf("pmtiles: metadata: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("pmtiles: metadata: not JSON: %.40q", b)
	}
	return b, nil
}

// Tile returns the bytes of tile z/x/y, gzip undone if the archive's tiles
// are gzipped; false if the archive has no such tile (an empty tile), as
// for a zoom outside the header's MinZoom to MaxZoom.
func (r *Reader) Tile(ctx context.Context, z uint8, x, y uint32) ([]byte, bool, error) {
	if !ValidZXY(z, x, y) {
		return nil, false, fmt.Errorf("pmtiles: tile %d/%d/%d: not a tile", z, x, y)
	}
	if z < r.header.MinZoom || z > r.header.MaxZoom {
		return nil, false, nil
	}
	id := ZXYToID(z, x, y)
	dir := r.root
	for depth := 1; ; depth++ {
		e, ok := find(dir, id)
		if !ok {
			return nil, false, nil
		}
		if e.RunLength > 0 {
			b, err := r.tile(ctx, e)
			if err != nil {
				return nil, false, fmt.Errorf("%w (tile %d/%d/%d)", err, z, x, y)
			}
			return b, true, nil
		}
		if depth == maxDepth {
			return nil, false, fmt.Errorf("pmtiles: tile %d/%d/%d: more than %d levels of directories", z, x, y, maxDepth)
		}
		var err error
		if dir, err = r.leaf(ctx, e); err != nil {
			return nil, false, fmt.Errorf("%w (tile %d/%d/%d)", err, z, x, y)
		}
	}
}

// tile reads and uncompresses the blob of tile entry e.
func (r *Reader) tile(ctx context.Context, e entry) ([]byte, error) {
	if e.Offset+uint64(e.Length) > r.sec.dataLen {
		return nil, fmt.Errorf("pmtiles: tile at %d, %d bytes: past the tile data's %d", e.Offset, e.Length, r.sec.dataLen)
	}
	b, err := r.read(ctx, "tile", r.sec.dataOff+e.Offset, uint64(e.Length), maxTileBytes)
	if err != nil {
		return nil, err
	}
	return decompress(b, r.header.TileCompression, maxTileBytes)
}

// leaf returns the leaf directory of entry e, from the cache or the source.
func (r *Reader) leaf(ctx context.Context, e entry) ([]entry, error) {
	if dir, ok := r.leaves.get(e.Offset); ok {
		return dir, nil
	}
	if e.Offset+uint64(e.Length) > r.sec.leavesLen {
		return nil, fmt.Errorf("pmtiles: leaf directory at %d, %d bytes: past the leaf directories' %d", e.Offset, e.Length, r.sec.leavesLen)
	}
	b, err := r.read(ctx, "leaf directory", r.sec.leavesOff+e.Offset, uint64(e.Length), maxDirBytes)
	if err != nil {
		return nil, err
	}
	dir, err := r.directory(b)
	if err != nil {
		return nil, fmt.Errorf("pmtiles: leaf directory at %d: %w", e.Offset, err)
	}
	r.leaves.put(e.Offset, dir)
	return dir, nil
}

// directory uncompresses and decodes a directory.
func (r *Reader) directory(b []byte) ([]entry, error) {
	b, err := decompress(b, r.header.InternalCompression, maxDirBytes)
	if err != nil {
		return nil, err
	}
	return decodeDirectory(b)
}

// read returns the n bytes at off of the part of the archive named what,
// which may not be longer than limit. Past readChunk bytes it reads in
// chunks, each as long as all before it, so that a length a corrupt archive
// claims costs memory only as far as the bytes are there.
func (r *Reader) read(ctx context.Context, what string, off, n uint64, limit int) ([]byte, error) {
	if n == 0 || n > uint64(limit) {
		return nil, fmt.Errorf("pmtiles: %s of %d bytes (want 1 to %d)", what, n, limit)
	}
	b := make([]byte, 0, min(n, readChunk))
	for uint64(len(b)) < n {
		k := min(n-uint64(len(b)), uint64(max(len(b), readChunk)))
		start := len(b)
		b = slices.Grow(b, int(k))[:start+int(k)]
		// Offsets past math.MaxInt64 are refused by decodeHeader and
		// decodeDirectory; their sums are checked against the sections' lengths.
		got, err := r.src.ReadAt(ctx, b[start:], int64(off)+int64(start))
		if got < int(k) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("pmtiles: read %s at %d, %d bytes: %w", what, off, n, err)
		}
	}
	return b, nil
}

// dirCache holds the directories used last, up to max entries in all.
type dirCache struct {
	mu      sync.Mutex
	max     int
	size    int
	order   list.List // of cachedDir, the last used first
	byStart map[uint64]*list.Element
}

type cachedDir struct {
	off     uint64
	entries []entry
}

func (c *dirCache) get(off uint64) ([]entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byStart[off]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(cachedDir).entries, true
}

// put adds dir, unless it alone exceeds the cache, and drops the
// directories used longest ago until the cache fits.
func (c *dirCache) put(off uint64, dir []entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byStart[off]; ok || len(dir) > c.max {
		return
	}
	if c.byStart == nil {
		c.byStart = map[uint64]*list.Element{}
	}
	c.byStart[off] = c.order.PushFront(cachedDir{off, dir})
	for c.size += len(dir); c.size > c.max; {
		last := c.order.Remove(c.order.Back()).(cachedDir)
		delete(c.byStart, last.off)
		c.size -= len(last.entries)
	}
}
