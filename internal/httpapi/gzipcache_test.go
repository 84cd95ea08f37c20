package httpapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// An answer's gzip encoding is made once and served again from the cache,
// decodes (by the standard library) to the body, and the cache holds at
// most its bytes, the oldest going first.
func TestGzipCache(t *testing.T) {
	body := bytes.Repeat([]byte("a tile of places "), 40)
	c := newGzipCache(1 << 20)
	first := c.encode(`"a"`, body)
	zr, err := gzip.NewReader(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("decoded %d bytes, %v; want the body's %d", len(got), err, len(body))
	}
	if again := c.encode(`"a"`, body); &again[0] != &first[0] {
		t.Error("the second encode compressed again, want the kept encoding")
	}

	small := newGzipCache(3 * len(first))
	for i := range 10 {
		small.encode(fmt.Sprintf(`"%d"`, i), body)
		if small.size > small.max {
			t.Fatalf("after %d: %d bytes kept, want at most %d", i+1, small.size, small.max)
		}
	}
	if _, ok := small.items[`"0"`]; ok {
		t.Error("the oldest encoding was kept")
	}
	if _, ok := small.items[`"9"`]; !ok {
		t.Error("the newest encoding was not kept")
	}
}

func TestAcceptsGzip(t *testing.T) {
	for v, want := range map[string]bool{
		"":                        false,
		"gzip":                    true,
		"GZip":                    true,
		"deflate, gzip;q=0.5":     true,
		"br, gzip;q=0":            false,
		"gzip; q=0.000":           false,
		"gzip;q=1.0":              true,
		"identity":                false,
		"deflate, br, zstd":       false,
		"gzip;q=0, gzip":          false,
		"x-gzip":                  false,
		"deflate;q=0.9,gzip;q=.1": true,
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		if v != "" {
			r.Header.Set("Accept-Encoding", v)
		}
		if got := acceptsGzip(r); got != want {
			t.Errorf("Accept-Encoding %q: %v, want %v", v, got, want)
		}
	}
}
