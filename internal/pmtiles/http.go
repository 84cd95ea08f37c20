package pmtiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// ErrChanged is the error of a read from an archive served over HTTP whose
// ETag is no longer the one it had when it was opened: the directories the
// Reader holds may no longer match it. Open it again.
var ErrChanged = errors.New("pmtiles: archive changed since it was opened")

// OpenURL opens the archive at url, an http or https URL whose server
// answers Range requests (206 Partial Content), with client, or
// http.DefaultClient if client is nil.
func OpenURL(ctx context.Context, client *http.Client, url string) (*Reader, error) {
	if client == nil {
		client = http.DefaultClient
	}
	r, err := Open(ctx, &httpSource{client: client, url: url})
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, url)
	}
	return r, nil
}

// httpSource reads an archive with HTTP Range requests.
type httpSource struct {
	client *http.Client
	url    string

	mu     sync.Mutex
	etag   string // of the first answer
	tagged bool   // etag is set
}

func (s *httpSource) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1))
	// A range of a gzip-encoded answer would be a range of the encoding.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		return 0, io.EOF
	default:
		return 0, fmt.Errorf("GET %s, Range %s: %s (want 206 Partial Content)", s.url, req.Header.Get("Range"), resp.Status)
	}
	var start, end int64
	if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/", &start, &end); err != nil || start != off {
		return 0, fmt.Errorf("GET %s, Range %s: Content-Range %q", s.url, req.Header.Get("Range"), resp.Header.Get("Content-Range"))
	}
	if err := s.sameETag(resp.Header.Get("ETag")); err != nil {
		return 0, err
	}
	n, err := io.ReadFull(resp.Body, p)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.ErrUnexpectedEOF // the answer is shorter than its range
		if int64(n) == end-start+1 {
			err = io.EOF // the range was cut short by the end of the archive
		}
	}
	return n, err
}

// sameETag remembers the first ETag it is given and compares the later
// ones with it.
func (s *httpSource) sameETag(etag string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.tagged {
		s.etag, s.tagged = etag, true
	}
	if etag != s.etag {
		return fmt.Errorf("%w: ETag %q, was %q", ErrChanged, etag, s.etag)
	}
	return nil
}
