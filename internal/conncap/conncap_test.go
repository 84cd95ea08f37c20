package conncap

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// server serves h on loopback through a Listener of max connections, and
// reports the most connections it ever held open at once.
type server struct {
	addr string
	mu   sync.Mutex
	open int
	peak int
}

func start(t *testing.T, limit int, h http.Handler) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: ln.Addr().String()}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch st {
		case http.StateNew:
			s.open++
			s.peak = max(s.peak, s.open)
		case http.StateClosed, http.StateHijacked:
			s.open--
		}
	}}
	done := make(chan error, 1)
	go func() { done <- New(ln, limit).Serve(srv) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != http.ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func (s *server) peakOpen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// keepAlive opens a connection, has one request on it answered, and leaves
// it open and idle.
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := ask(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// ask sends GET / on c and reads the answer, within 5 seconds.
func ask(c net.Conn) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})

// Past the cap, each new connection is served, and the longest-idle
// keep-alive is closed to make room: the server never holds more than the
// cap, of which one is kept for the next connection, and those it holds
// still serve.
func TestIdleMakeRoom(t *testing.T) {
	const max = 4
	s := start(t, max, ok)
	var conns []net.Conn
	for range 3 * max {
		conns = append(conns, keepAlive(t, s.addr))
	}
	if p := s.peakOpen(); p > max {
		t.Errorf("%d connections open at once, cap %d", p, max)
	}
	// Which were closed is the server's to choose (the longest idle, as
	// it saw them go idle); how many is not.
	served := 0
	for _, c := range conns {
		if ask(c) == nil {
			served++
		}
	}
	if served != max-1 {
		t.Errorf("%d keep-alives still served, want %d", served, max-1)
	}
}

// When every connection is busy, a new one waits for one to close, rather
// than pass the cap.
func TestBusyWait(t *testing.T) {
	const max = 2
	release := make(chan struct{})
	entered := make(chan struct{}, max+1)
	s := start(t, max, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		w.Header().Set("Connection", "close")
	}))
	errs := make(chan error, max+1)
	for range max {
		go func() {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			errs <- ask(c)
		}()
	}
	for range max {
		<-entered
	}
	c, err := net.Dial("tcp", s.addr) // the kernel takes it; the server does not yet
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { errs <- ask(c) }()
	select {
	case <-entered:
		t.Fatal("a request past the cap was served while every slot was busy")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	for range max + 1 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if p := s.peakOpen(); p > max {
		t.Errorf("%d connections open at once, cap %d", p, max)
	}
}
