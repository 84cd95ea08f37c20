package httpapi

import (
	"bytes"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipCacheBytes bounds the gzip encodings a server keeps (gzipCache).
const gzipCacheBytes = 16 << 20

// gzipCache keeps the gzip encoding of recent answers by their ETag, a
// digest of the body, so that an answer asked for again (a tile hit, most
// often) is not compressed again: compressing a small tile at every
// request took two thirds of the server's CPU on tile hits (a CPU profile
// under load, docs/benchmarks.md), most of it building Huffman tables for
// a few hundred bytes. The oldest encodings go first once the cache holds
// more than its bytes; being keyed by a digest of the body, an entry is
// never stale.
type gzipCache struct {
	max int

	mu    sync.Mutex
	size  int
	items map[string][]byte
	order []string // the keys, oldest first
	pool  sync.Pool
}

func newGzipCache(max int) *gzipCache {
	return &gzipCache{max: max, items: map[string][]byte{}}
}

// encode returns body gzipped, from the cache if etag's encoding is there,
// or compressed and kept; nil if it could not be.
func (c *gzipCache) encode(etag string, body []byte) []byte {
	c.mu.Lock()
	gz, ok := c.items[etag]
	c.mu.Unlock()
	if ok {
		return gz
	}
	gz = c.compress(body)
	if gz == nil || len(gz) > c.max {
		return gz
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[etag]; ok {
		return gz // another request compressed it meanwhile
	}
	for c.size+len(gz) > c.max && len(c.order) > 0 {
		c.size -= len(c.items[c.order[0]])
		delete(c.items, c.order[0])
		c.order = c.order[1:]
	}
	c.items[etag] = gz
	c.order = append(c.order, etag)
	c.size += len(gz)
	return gz
}

// compress gzips body at compressLevel with a pooled writer.
func (c *gzipCache) compress(body []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(body)/2 + 64)
	w, _ := c.pool.Get().(*gzip.Writer)
	if w == nil {
		var err error
		if w, err = gzip.NewWriterLevel(&out, compressLevel); err != nil {
			return nil
		}
	} else {
		w.Reset(&out)
	}
	defer c.pool.Put(w)
	if _, err := w.Write(body); err != nil {
		return nil
	}
	if err := w.Close(); err != nil {
		return nil
	}
	return out.Bytes()
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip: the
// token with a weight above zero (RFC 9110 section 12.5.3).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q, ok := strings.CutPrefix(strings.TrimSpace(params), "q=")
			return !ok || strings.Trim(strings.TrimSpace(q), "0.") != ""
		}
	}
	return false
}
