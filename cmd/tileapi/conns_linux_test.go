package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childFileLimit is the open-file limit of the server TestConnCap runs.
const childFileLimit = 256

// Under an open-file limit, more idle keep-alive connections than the
// limit allows do not keep a new client from an answer: serve, in a
// process of its own with a limit of 256 open files, caps its connections
// below the limit, closing the longest-idle one for each new one. Without
// the cap, accept fails (EMFILE) once the descriptors are gone, and the new
// client waits in the kernel's backlog until an idle connection times out.
func TestConnCap(t *testing.T) {
	const idle = 2 * childFileLimit
	addr, maxConns := startLimitedServe(t)
	if maxConns >= childFileLimit {
		t.Fatalf("the connection cap is %d under a limit of %d open files", maxConns, childFileLimit)
	}

	// Open the idle connections, each with one request answered.
	conns := make([]net.Conn, 0, idle)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for range idle {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err != nil {
			t.Fatalf("dial after %d connections: %v", len(conns), err)
		}
		c.SetDeadline(deadline)
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for _, c := range conns {
		wg.Go(func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			resp.Body.Close()
			mu.Lock()
			answered++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%d of %d connections answered under a cap of %d", answered, idle, maxConns)
	if answered != idle {
		t.Errorf("%d of %d connections answered: each new one should have made room", answered, idle)
	}

	// A new client, while the server holds as many idle ones as it may.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("a new client among %d idle connections: %v", idle, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a new client: status %d", resp.StatusCode)
	}
}

// startLimitedServe runs TestConnCapChild, a `tileapi serve` in a process
// of its own under an open-file limit of childFileLimit, and returns its
// address and connection cap; it stops the process when t ends.
func startLimitedServe(t *testing.T) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConnCapChild$")
	cmd.Env = append(os.Environ(), "TILEAPI_TEST_CONNCAP_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the child serves until its stdin closes, as when this process dies
		if err := cmd.Wait(); err != nil {
			t.Errorf("the server's process: %v", err)
		}
	})
	type serving struct {
		Msg, Listener, Addr string
		MaxConns            int `json:"max_conns"`
	}
	found := make(chan serving, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l serving
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "serving" && l.Listener == "public" {
				found <- l
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case l := <-found:
		return l.Addr, l.MaxConns
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not start within 30s")
	}
	return "", 0
}

// TestConnCapChild is the server of TestConnCap, run in a process of its
// own: it lowers its open-file limit, then serves until its stdin closes.
func TestConnCapChild(t *testing.T) {
	if os.Getenv("TILEAPI_TEST_CONNCAP_CHILD") == "" {
		return // elsewhere it does nothing
	}
	lim := syscall.Rlimit{Cur: childFileLimit, Max: childFileLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	err := run(ctx, []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", "none"},
		func(string) string { return "" }, io.Discard, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
}
