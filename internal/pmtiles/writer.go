package pmtiles

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// Writer writes a clustered archive: tiles are added in any order, kept
// gzipped in a temporary file, each distinct content once, and written in
// tile ID order by Finish after the directories. It is not safe for
// concurrent use.
type Writer struct {
	out      io.Writer
	tmp      *os.File // each distinct tile content once, gzipped, as added
	tmpLen   int64
	tiles    []tileRef
	contents []blob
	byHash   map[[sha256.Size]byte]uint32 // index into contents
	minZ     uint8                        // of the tiles added
	maxZ     uint8
	gz       *gzip.Writer // reused by gzip

	// Where directories split (tests lower them to make small archives
	// with leaves): the most bytes of the header and the root directory,
	// and the fewest entries of a leaf directory.
	rootLimit, leafMin int
}

type tileRef struct {
	id      uint64
	content uint32 // index into Writer.contents
}

// blob is where a tile content lies in the temporary file.
type blob struct {
	off int64
	len uint32
}

// NewWriter returns a Writer of an archive to out, with its temporary file
// in dir (os.TempDir if dir is ""). Close removes the file.
func NewWriter(out io.Writer, dir string) (*Writer, error) {
	tmp, err := os.CreateTemp(dir, "pmtiles-*.tiles")
	if err != nil {
		return nil, fmt.Errorf("pmtiles: %w", err)
	}
	return &Writer{out: out, tmp: tmp, byHash: map[[sha256.Size]byte]uint32{}, minZ: MaxZoom, gz: gzip.NewWriter(nil),
		rootLimit: rootWithin, leafMin: 4096}, nil
}

var errFinished = errors.New("pmtiles: writer finished or closed")

// AddTile adds tile z/x/y with contents data, the tile uncompressed: the
// Writer gzips it. An empty tile is not written: a reader finds no tile,
// which means an empty one.
func (w *Writer) AddTile(z uint8, x, y uint32, data []byte) error {
	switch {
	case w.tmp == nil:
		return errFinished
	case !ValidZXY(z, x, y):
		return fmt.Errorf("pmtiles: add tile %d/%d/%d: not a tile", z, x, y)
	case len(data) > maxTileBytes:
		return fmt.Errorf("pmtiles: add tile %d/%d/%d: %d bytes, more than a Reader takes (%d)", z, x, y, len(data), maxTileBytes)
	case len(data) == 0:
		return nil
	}
	w.minZ, w.maxZ = min(w.minZ, z), max(w.maxZ, z)
	sum := sha256.Sum256(data)
	c, ok := w.byHash[sum]
	if !ok {
		gz := w.gzip(data)
		if _, err := w.tmp.Write(gz); err != nil {
			return fmt.Errorf("pmtiles: add tile %d/%d/%d: %w", z, x, y, err)
		}
		c = uint32(len(w.contents))
		w.contents = append(w.contents, blob{w.tmpLen, uint32(len(gz))})
		w.tmpLen += int64(len(gz))
		w.byHash[sum] = c
	}
	w.tiles = append(w.tiles, tileRef{ZXYToID(z, x, y), c})
	return nil
}

// Finish writes the archive with the tiles added and metadata, which
// encodes as a JSON object (nil for {}), and removes the temporary file.
// From h it takes TileType, MinZoom, MaxZoom (which must cover the tiles
// added), Bounds (the whole Web Mercator world if zero), Center (the middle
// of Bounds if zero) and CenterZoom; it sets the rest: gzip for tiles and
// directories, clustered, the counts.
func (w *Writer) Finish(h Header, metadata any) (err error) {
	if w.tmp == nil {
		return errFinished
	}
	defer func() {
		if closeErr := w.Close(); err == nil {
			err = closeErr
		}
	}()
	if len(w.tiles) == 0 {
		return errors.New("pmtiles: no tiles added (a directory holds at least one)")
	}
	if h, err = w.header(h); err != nil {
		return err
	}
	meta, err := metadataJSON(metadata)
	if err != nil {
		return err
	}
	meta = w.gzip(meta)

	slices.SortFunc(w.tiles, func(a, b tileRef) int { return cmp.Compare(a.id, b.id) })
	entries, order, err := w.entries()
	if err != nil {
		return err
	}
	root, leaves, err := w.directories(entries)
	if err != nil {
		return err
	}
	h.AddressedTiles, h.TileEntries, h.TileContents = uint64(len(w.tiles)), uint64(len(entries)), uint64(len(order))
	s := sections{rootOff: headerLen, rootLen: uint64(len(root))}
	s.metadataOff, s.metadataLen = s.rootOff+s.rootLen, uint64(len(meta))
	s.leavesOff, s.leavesLen = s.metadataOff+s.metadataLen, uint64(len(leaves))
	s.dataOff = s.leavesOff + s.leavesLen
	for _, c := range order {
		s.dataLen += uint64(w.contents[c].len)
	}

	out := bufio.NewWriterSize(w.out, 1<<20)
	for _, b := range [][]byte{encodeHeader(h, s), root, meta, leaves} {
		out.Write(b) // a failure is kept by out and returned by Flush
	}
	for _, c := range order {
		b := w.contents[c]
		if _, err := io.Copy(out, io.NewSectionReader(w.tmp, b.off, int64(b.len))); err != nil {
			return fmt.Errorf("pmtiles: write tile data: %w", err)
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("pmtiles: write: %w", err)
	}
	return nil
}

// header checks the fields of h that the caller sets and fills the others.
func (w *Writer) header(h Header) (Header, error) {
	if h.MinZoom > h.MaxZoom || h.MaxZoom > MaxZoom {
		return h, fmt.Errorf("pmtiles: header: zooms %d to %d (want MinZoom <= MaxZoom <= %d)", h.MinZoom, h.MaxZoom, MaxZoom)
	}
	if len(w.tiles) > 0 && (w.minZ < h.MinZoom || w.maxZ > h.MaxZoom) {
		return h, fmt.Errorf("pmtiles: header: zooms %d to %d do not cover the tiles added, of zooms %d to %d", h.MinZoom, h.MaxZoom, w.minZ, w.maxZ)
	}
	if h.Bounds == [4]float64{} {
		h.Bounds = [4]float64{-180, -85.0511287798066, 180, 85.0511287798066}
	}
	b := h.Bounds
	if !(-180 <= b[0] && b[0] <= b[2] && b[2] <= 180 && -90 <= b[1] && b[1] <= b[3] && b[3] <= 90) {
		return h, fmt.Errorf("pmtiles: header: bounds %v (want min lng, min lat, max lng, max lat within -180, -90, 180, 90)", b)
	}
	if h.Center == [2]float64{} {
		h.Center = [2]float64{(b[0] + b[2]) / 2, (b[1] + b[3]) / 2}
	}
	if c := h.Center; !(-180 <= c[0] && c[0] <= 180 && -90 <= c[1] && c[1] <= 90) {
		return h, fmt.Errorf("pmtiles: header: center %v (want lng, lat within -180, -90, 180, 90)", c)
	}
	h.Clustered, h.InternalCompression, h.TileCompression = true, Gzip, Gzip
	return h, nil
}

// metadataJSON returns metadata encoded: a JSON object, {} for nil.
func metadataJSON(metadata any) ([]byte, error) {
	if metadata == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(metadata)
	if err != nil {
		return nil, fmt.Errorf("pmtiles: metadata: %w", err)
	}
	if b[0] != '{' {
		return nil, fmt.Errorf("pmtiles: metadata: %.20s is not a JSON object", b)
	}
	return b, nil
}

// entries returns the directory entries of the sorted tiles, consecutive
// tiles of the same content in one entry, and the contents in the order
// the tile data holds them, each once, where its first tile puts it.
func (w *Writer) entries() ([]entry, []uint32, error) {
	var entries []entry
	var order []uint32
	placed := make([]uint64, len(w.contents)) // offset + 1 in the tile data, 0 if not yet placed
	next := uint64(0)
	for i, t := range w.tiles {
		if i > 0 && t.id == w.tiles[i-1].id {
			z, x, y := IDToZXY(t.id)
			return nil, nil, fmt.Errorf("pmtiles: tile %d/%d/%d added twice", z, x, y)
		}
		b := w.contents[t.content]
		if placed[t.content] == 0 {
			placed[t.content] = next + 1
			next += uint64(b.len)
			order = append(order, t.content)
		}
		off := placed[t.content] - 1
		if n := len(entries); n > 0 {
			last := &entries[n-1]
			if last.Offset == off && last.TileID+uint64(last.RunLength) == t.id && last.RunLength < math.MaxUint32 {
				last.RunLength++
				continue
			}
		}
		entries = append(entries, entry{TileID: t.id, Offset: off, Length: b.len, RunLength: 1})
	}
	return entries, order, nil
}

// directories returns the root directory and the leaf directories of
// entries, gzipped: the entries in the root if it fits in the first 16 KiB
// with the header, otherwise in leaves of equal numbers of entries, as few
// as make a root of pointers to them fit.
func (w *Writer) directories(entries []entry) (root, leaves []byte, err error) {
	root = w.gzip(encodeDirectory(entries))
	if headerLen+len(root) <= w.rootLimit {
		return root, nil, nil
	}
	for per := max(w.leafMin, len(entries)/3500); ; per += max(1, per/5) {
		var pointers []entry
		leaves = leaves[:0]
		for i := 0; i < len(entries); i += per {
			leaf := encodeDirectory(entries[i:min(i+per, len(entries))])
			if len(leaf) > maxDirBytes {
				return nil, nil, fmt.Errorf("pmtiles: %d tile entries: too many for one level of leaf directories", len(entries))
			}
			leaf = w.gzip(leaf)
			pointers = append(pointers, entry{TileID: entries[i].TileID, Offset: uint64(len(leaves)), Length: uint32(len(leaf))})
			leaves = append(leaves, leaf...)
		}
		root = w.gzip(encodeDirectory(pointers))
		if headerLen+len(root) <= w.rootLimit {
			return root, leaves, nil
		}
		if len(pointers) == 1 {
			return nil, nil, fmt.Errorf("pmtiles: a root directory of one leaf is %d bytes, over %d", len(root), w.rootLimit-headerLen)
		}
	}
}

// gzip returns b gzipped.
func (w *Writer) gzip(b []byte) []byte {
	var buf bytes.Buffer
	w.gz.Reset(&buf)
	w.gz.Write(b) // writes to a bytes.Buffer do not fail
	w.gz.Close()
	return buf.Bytes()
}

// Close removes the temporary file; the Writer then takes no more tiles.
// It is a no-op after Finish.
func (w *Writer) Close() error {
	if w.tmp == nil {
		return nil
	}
	name := w.tmp.Name()
	err := w.tmp.Close()
	w.tmp = nil
	if rmErr := os.Remove(name); err == nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("pmtiles: temporary file: %w", err)
	}
	return nil
}
