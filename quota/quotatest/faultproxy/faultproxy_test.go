package faultproxy

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echo is a line server: it answers each line with its name, a colon and
// the line, after delay.
type echo struct {
	ln    net.Listener
	lines atomic.Int64 // lines received
}

func startEcho(t *testing.T, name string, delay time.Duration) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.lines.Add(1)
					time.Sleep(delay)
					if _, err := conn.Write([]byte(name + ":" + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{conn, bufio.NewReader(conn)}
}

// ask sends line and returns the answer, or the error of reading it within
// wait.
func (c *client) ask(line string, wait time.Duration) (string, error) {
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return c.answer(wait)
}

func (c *client) answer(wait time.Duration) (string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func mustAsk(t *testing.T, c *client, line, want string) {
	t.Helper()
	got, err := c.ask(line, 5*time.Second)
	if err != nil || got != want {
		t.Fatalf("ask %q: got %q, %v; want %q", line, got, err, want)
	}
}

func TestForwardAndLatency(t *testing.T) {
	e := startEcho(t, "a", 0)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	mustAsk(t, c, "hello", "a:hello")

	const up, down = 150 * time.Millisecond, 100 * time.Millisecond
	p.SetLatency(up, down)
	start := time.Now()
	mustAsk(t, c, "slow", "a:slow")
	if took := time.Since(start); took < up+down {
		t.Errorf("a round trip with latency %v up and %v down took %v", up, down, took)
	}

	p.Restore()
	mustAsk(t, c, "fast", "a:fast") // the connection survives a change of latency
}

func TestBlackHole(t *testing.T) {
	e := startEcho(t, "a", 0)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	mustAsk(t, c, "before", "a:before")

	p.BlackHole()
	if got, err := c.ask("lost", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a black hole answered %q, %v; want a read timeout", got, err)
	}
	fresh := dial(t, p.Addr()) // still accepted, never answered
	if got, err := fresh.ask("lost too", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a new connection to a black hole answered %q, %v; want a read timeout", got, err)
	}
	if n := e.lines.Load(); n != 1 {
		t.Errorf("the target received %d lines; want 1: a black hole forwards nothing", n)
	}

	p.Restore()
	// A connection whose bytes were dropped is closed: it cannot resume.
	if got, err := c.answer(2 * time.Second); err == nil || isTimeout(err) {
		t.Errorf("a connection that lost bytes read %q, %v after Restore; want it closed", got, err)
	}
	mustAsk(t, dial(t, p.Addr()), "after", "a:after")
}

// TestSettle: after BlackHole, the answer to a request the target already
// received is still delivered, and Settle returns once it has been.
func TestSettle(t *testing.T) {
	e := startEcho(t, "a", 300*time.Millisecond)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	if _, err := c.conn.Write([]byte("slow\n")); err != nil {
		t.Fatal(err)
	}
	for e.lines.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.BlackHole()
	if err := p.Settle(50 * time.Millisecond); err == nil {
		t.Fatal("Settle returned while an answer was still due")
	}
	if err := p.Settle(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := c.answer(time.Millisecond); err != nil || got != "a:slow" {
		t.Fatalf("after Settle the answer was %q, %v; want a:slow delivered", got, err)
	}
}

func TestCut(t *testing.T) {
	e := startEcho(t, "a", 0)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	mustAsk(t, c, "before", "a:before")

	p.Cut()
	if got, err := c.ask("gone", 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a cut connection answered %q, %v; want it closed", got, err)
	}
	if conn, err := net.Dial("tcp", p.Addr()); err == nil { // or reset as it connects
		defer conn.Close()
		c := &client{conn, bufio.NewReader(conn)}
		if got, err := c.ask("gone", 2*time.Second); err == nil || isTimeout(err) {
			t.Fatalf("a new connection while cut answered %q, %v; want it reset", got, err)
		}
	}

	p.Restore()
	mustAsk(t, dial(t, p.Addr()), "after", "a:after")
}

func TestRetarget(t *testing.T) {
	a, b := startEcho(t, "a", 0), startEcho(t, "b", 0)
	p := startProxy(t, a.ln.Addr().String())
	c := dial(t, p.Addr())
	mustAsk(t, c, "x", "a:x")

	p.Retarget(b.ln.Addr().String())
	if got, err := c.ask("y", 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a connection to the old target answered %q, %v after Retarget; want it closed", got, err)
	}
	mustAsk(t, dial(t, p.Addr()), "z", "b:z")
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
