package pmtiles

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// archiveServer serves archive with http.ServeContent, which answers Range
// requests, under the ETag that setETag last set; it counts the requests.
type archiveServer struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	etag     string
}

func serve(t *testing.T, archive []byte) *archiveServer {
	s := &archiveServer{etag: `"1"`}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		w.Header().Set("ETag", s.etag)
		s.mu.Unlock()
		http.ServeContent(w, r, "archive.pmtiles", time.Time{}, bytes.NewReader(archive))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *archiveServer) setETag(etag string) {
	s.mu.Lock()
	s.etag = etag
	s.mu.Unlock()
}

func TestOpenURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		maxZ uint8
	}{
		{"shorter than 16 KiB", 1},
		{"with leaves", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tiles := pyramid(tc.maxZ)
			h := testHeader
			h.MaxZoom = tc.maxZ
			b := write(t, tiles, h, map[string]string{"name": "http"}, smallLeaves)
			srv := serve(t, b)
			ctx := context.Background()
			r, err := OpenURL(ctx, srv.Client(), srv.URL+"/archive.pmtiles")
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.requests.Load(); got != 1 {
				t.Errorf("Open: %d requests, want 1 for the header and the root directory", got)
			}
			readAll(t, r, tiles)
			// The leaves are cached: the second time, one request a tile.
			before := srv.requests.Load()
			readAll(t, r, tiles)
			present := 0
			for _, tile := range tiles {
				if len(tile.data) > 0 {
					present++
				}
			}
			if got := srv.requests.Load() - before; got != int64(present) {
				t.Errorf("%d requests for %d tiles", got, present)
			}
			if meta, err := r.Metadata(ctx); err != nil || string(meta) != `{"name":"http"}` {
				t.Errorf("Metadata = %s, %v", meta, err)
			}

			srv.setETag(`"2"`)
			if _, _, err := r.Tile(ctx, 0, 0, 0); !errors.Is(err, ErrChanged) {
				t.Errorf("Tile after the ETag changed: %v, want ErrChanged", err)
			}
		})
	}
}

func TestOpenURLErrors(t *testing.T) {
	archive := write(t, pyramid(1), Header{MaxZoom: 1}, nil, nil)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string // in the error, after the server's URL
	}{
		{"no Range", func(w http.ResponseWriter, r *http.Request) { w.Write(archive) },
			": 200 OK (want 206 Partial Content)"},
		{"not found", http.NotFound, ": 404 Not Found (want 206 Partial Content)"},
		{"wrong range", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 5-10/100")
			w.WriteHeader(http.StatusPartialContent)
		}, `, Range bytes=0-16383: Content-Range "bytes 5-10/100"`},
		{"not an archive", func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "a.html", time.Time{}, strings.NewReader("<html>"))
		}, "pmtiles: not a PMTiles v3 archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			_, err := OpenURL(context.Background(), srv.Client(), srv.URL)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}
