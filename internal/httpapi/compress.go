package httpapi

import (
	"io"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
)

// compressedTypes are the answers compressed when the client accepts it.
var compressedTypes = []string{"application/json", "application/geo+json", "application/problem+json", "application/vnd.mapbox-vector-tile"}

// compressLevel is the level of both encodings: the one chi's own default
// would use.
const compressLevel = 5

// newCompressor compresses answers with klauspost/compress's gzip and
// deflate rather than the standard library's, which chi uses by default:
// at the same level their output is within 2% of the size, and they take
// half the time (a z3 tile: 0.37 against 0.76 ms, docs/benchmarks.md). A
// tile is compressed at every request that asks, hit or miss, so this is
// most of what gzip costs the server. gzip is preferred, as chi does.
func newCompressor() *middleware.Compressor {
	c := middleware.NewCompressor(compressLevel, compressedTypes...)
	c.SetEncoder("deflate", func(w io.Writer, level int) io.Writer {
		fw, err := flate.NewWriter(w, level)
		if err != nil {
			return nil // chi then sends the answer uncompressed
		}
		return fw
	})
	c.SetEncoder("gzip", func(w io.Writer, level int) io.Writer {
		gw, err := gzip.NewWriterLevel(w, level)
		if err != nil {
			return nil
		}
		return gw
	})
	return c
}
