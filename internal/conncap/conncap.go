// Package conncap caps the client connections an HTTP server holds open at
// once, so that idle keep-alive connections cannot take every file
// descriptor of the process: at the cap, the connection that has been idle
// longest is closed to make room for the next, and only when none is idle
// does the next wait (in the kernel's backlog, as with
// golang.org/x/net/netutil.LimitListener) until one closes.
//
// Closing an idle keep-alive connection is what HTTP/1.1 lets a server do
// at any time (RFC 9112, section 9.6); a client that sends on it in that
// instant retries an idempotent request on a new connection, as Go's and
// browsers' clients do.
package conncap

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// Listener is a net.Listener that holds at most a number of connections
// open. It learns which are idle, and which have closed, from its
// ConnState method, which must be the http.Server's ConnState hook.
type Listener struct {
	net.Listener
	max int

	mu      sync.Mutex
	open    int                        // connections accepted and not yet closed, the one being accepted included
	idle    *list.List                 // of net.Conn, longest idle first
	at      map[net.Conn]*list.Element // each idle connection's element of idle
	closing map[net.Conn]bool          // closed to make room, not yet reported closed

	wake      chan struct{} // a connection went idle or closed
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// New returns ln holding at most max connections open; max must be at
// least 1.
func New(ln net.Listener, max int) *Listener {
	return &Listener{
		Listener: ln, max: max,
		idle: list.New(), at: map[net.Conn]*list.Element{}, closing: map[net.Conn]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// Serve serves srv on l: it sets srv.ConnState to l.ConnState, and any hook
// srv had runs after it.
func (l *Listener) Serve(srv *http.Server) error {
	hook := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		l.ConnState(c, s)
		if hook != nil {
			hook(c, s)
		}
	}
	return srv.Serve(l)
}

// Accept takes a slot, closing the longest-idle connection if none is free
// and waiting if none is idle either, then accepts a connection.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			break
		}
		var oldest net.Conn
		// One connection closed for each slot wanted: while one closes,
		// wait for it.
		if e := l.idle.Front(); e != nil && len(l.closing) == 0 {
			oldest = l.unidle(e)
			l.closing[oldest] = true
		}
		l.mu.Unlock()
		if oldest != nil {
			// Its server goroutine sees the close and reports
			// StateClosed, which frees its slot.
			_ = oldest.Close()
		}
		select {
		case <-l.wake:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.mu.Lock()
		l.open--
		l.mu.Unlock()
		return nil, err
	}
	return c, nil
}

// ConnState records a connection's change of state: the http.Server's
// ConnState hook.
func (l *Listener) ConnState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	switch s {
	case http.StateIdle:
		if _, ok := l.at[c]; !ok {
			l.at[c] = l.idle.PushBack(c)
		}
	case http.StateActive:
		if e, ok := l.at[c]; ok {
			l.unidle(e)
		}
	case http.StateClosed, http.StateHijacked: // either is a connection's last state
		if e, ok := l.at[c]; ok {
			l.unidle(e)
		}
		delete(l.closing, c)
		l.open--
	}
	l.mu.Unlock()
	if s != http.StateNew && s != http.StateActive {
		select {
		case l.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// unidle takes e's connection off the idle list; l.mu is held.
func (l *Listener) unidle(e *list.Element) net.Conn {
	c := l.idle.Remove(e).(net.Conn)
	delete(l.at, c)
	return c
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}
