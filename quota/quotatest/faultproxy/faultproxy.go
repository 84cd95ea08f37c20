// Package faultproxy is a loopback TCP proxy for tests that puts faults
// between a client and the server it talks to: latency, a peer that hangs,
// a peer that is gone, and a move to another server. Each connection it
// accepts is forwarded over a connection of its own to the target.
package faultproxy

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// mode is what the proxy does with traffic.
type mode int

const (
	forward   mode = iota // pass it on, after the set latency
	blackHole             // read what clients send and drop it
	cut                   // close every connection and reset new ones
)

// Proxy forwards connections made to Addr to a target address.
type Proxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	target   string
	mode     mode
	up, down time.Duration // latency of each chunk towards the target, and back
	conns    map[*pair]struct{}
	closed   bool
}

// pair is one proxied connection: the client's and the proxy's own to the
// target.
type pair struct {
	p              *Proxy
	client, server net.Conn
	// lost is set when the proxy dropped bytes the client sent: the stream
	// is broken for good, so Restore closes the pair.
	lost atomic.Bool
	// pending is set while bytes forwarded to the target have had no answer.
	pending atomic.Bool
	once    sync.Once
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays each chunk read from then on by up on its way to the
// target and by down on its way back. Order is kept.
func (p *Proxy) SetLatency(up, down time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up, p.down = up, down
}

// BlackHole makes the proxy a hung peer: connections are still accepted and
// what clients send is read, but nothing more reaches the target. Answers
// to what reached it before are still delivered, as a server that hangs has
// already sent them.
func (p *Proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = blackHole
}

// Cut makes the target look dead: every connection is closed, and every
// new one reset, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.mode = cut
	ps := p.takeConns(func(*pair) bool { return true })
	p.mu.Unlock()
	closeAll(ps)
}

// Retarget sends new connections to addr and closes the current ones, as a
// failover moves clients to another server.
func (p *Proxy) Retarget(addr string) {
	p.mu.Lock()
	p.target = addr
	ps := p.takeConns(func(*pair) bool { return true })
	p.mu.Unlock()
	closeAll(ps)
}

// Restore forwards again without latency. Connections whose bytes were
// dropped are closed: their streams cannot be resumed.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.mode, p.up, p.down = forward, 0, 0
	ps := p.takeConns(func(c *pair) bool { return c.lost.Load() })
	p.mu.Unlock()
	closeAll(ps)
}

// Settle waits until everything forwarded to the target has been answered,
// for a request-response protocol: after BlackHole, it is the point from
// which no request the target ran can lose its answer. It fails after
// timeout.
func (p *Proxy) Settle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		n := 0
		for c := range p.conns {
			if c.pending.Load() {
				n++
			}
		}
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("faultproxy: %d connections still wait for an answer after %v", n, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ps := p.takeConns(func(*pair) bool { return true })
	p.mu.Unlock()
	err := p.ln.Close()
	closeAll(ps)
	p.wg.Wait()
	return err
}

// takeConns removes the pairs that match from the set; p.mu is held.
func (p *Proxy) takeConns(match func(*pair) bool) []*pair {
	var ps []*pair
	for c := range p.conns {
		if match(c) {
			ps = append(ps, c)
			delete(p.conns, c)
		}
	}
	return ps
}

func closeAll(ps []*pair) {
	for _, c := range ps {
		c.close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		m, target := p.mode, p.target
		p.mu.Unlock()
		if m == cut {
			reset(client)
			continue
		}
		server, err := net.DialTimeout("tcp", target, time.Second)
		if err != nil {
			reset(client)
			continue
		}
		c := &pair{p: p, client: client, server: server}
		p.mu.Lock()
		if p.closed || p.mode == cut {
			p.mu.Unlock()
			c.close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(c, client, server, true)
		go p.pump(c, server, client, false)
	}
}

// chunk is bytes read from one side, to be written to the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst, towards the target if up, with the latency and
// mode in force when each chunk is read. A writer goroutine keeps the
// reader from waiting out the latency of earlier chunks.
func (p *Proxy) pump(c *pair, src, dst net.Conn, up bool) {
	defer p.wg.Done()
	defer c.close()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.close() // a failed write ends the reader too
		for ch := range q {
			time.Sleep(time.Until(ch.due))
			if up {
				c.pending.Store(true)
			}
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
			if !up {
				c.pending.Store(false)
			}
		}
	}()
	defer func() { close(q); <-done }()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			m, lat := p.mode, p.down
			if up {
				lat = p.up
			}
			p.mu.Unlock()
			if up && m == blackHole {
				c.lost.Store(true)
			} else {
				q <- chunk{buf[:n], time.Now().Add(lat)}
			}
		}
		if err != nil {
			return
		}
	}
}

// close closes both connections and forgets the pair; p.mu must not be
// held. The client's is closed, not reset: an answer already written to it
// is still read before the end of the stream, as Settle promises.
func (c *pair) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

// reset closes conn with an RST rather than a FIN, as a peer that is gone
// does.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}
