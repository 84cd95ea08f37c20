package quotatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process owned by one test, for tests that
// must stop and restart their Redis (failure policy, NOSCRIPT recovery).
type RedisServer struct {
	Addr   string
	dir    string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	output *bytes.Buffer // what the server printed, for a failed start
}

// StartRedisServer starts a redis-server on a free loopback port, with no
// persistence, and stops it when tb ends. extra is appended to its arguments.
// Where no redis-server is on PATH it fails tb, or skips it under
// TEST_SKIP_MISSING.
func StartRedisServer(tb testing.TB, extra ...string) *RedisServer {
	tb.Helper()
	RequireCommand(tb, "redis-server", "apt-get install redis-server")
	s, err := newRedisServer(tb.TempDir(), extra...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

func newRedisServer(dir string, extra ...string) (*RedisServer, error) {
	return newRedisServerOn(FreePort, dir, extra...)
}

// startTries is how many free ports a new server tries: a port free when
// asked for can be taken by another process before the server binds it.
const startTries = 5

// newRedisServerOn starts a server on a port from freePort, trying another
// when the server exits at once (its port was taken meanwhile).
func newRedisServerOn(freePort func() (int, error), dir string, extra ...string) (*RedisServer, error) {
	var err error
	for range startTries {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
		s.args = append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--save", "", "--appendonly", "no", "--dir", dir}, extra...)
		if err = s.Start(); err == nil {
			return s, nil
		}
		if !errors.Is(err, errExited) {
			return nil, err
		}
	}
	return nil, err
}

// URL returns the server's URL, for NewClient.
func (s *RedisServer) URL() string { return "redis://" + s.Addr + "/0" }

// errExited is Start's error when the server ends before it answers.
var errExited = errors.New("redis-server exited")

// Start starts the server (again) on its address and waits until it answers.
func (s *RedisServer) Start() error {
	s.cmd = exec.Command("redis-server", s.args...)
	s.output = new(bytes.Buffer)
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	// Should the test binary die before its cleanup runs, take the server
	// with it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := Spawn(s.cmd); err != nil {
		s.cmd = nil
		return fmt.Errorf("quotatest: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		close(exited)
	}(s.cmd)
	if err := waitPing(s.Addr, 10*time.Second, exited); err != nil {
		s.Stop() // the output is whole, and safe to read, once it has exited
		out := lastLines(s.output.String(), 3)
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// lastLines returns the last n lines of out, joined by " | ".
func lastLines(out string, n int) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// startLocalRedis starts a redis-server from this machine's PATH for the
// whole test binary and returns its URL; Main stops it.
func startLocalRedis(context.Context) (string, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return "", err
	}
	dir, err := TempDir("redis")
	if err != nil {
		return "", err
	}
	s, err := newRedisServer(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	OnExit(func() {
		s.Stop()
		os.RemoveAll(dir)
	})
	return "redis://" + s.Addr + "/0", nil
}

// Stop kills the server at once, as a crash would.
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Hang stops the server with SIGSTOP: it keeps its connections open and
// answers nothing, as a hung server does, until Resume. The test's cleanup
// resumes it, so Stop can end it.
func (s *RedisServer) Hang(tb testing.TB) {
	tb.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Resume)
}

// Resume lets a hung server go on (SIGCONT).
func (s *RedisServer) Resume() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// startRedisCluster starts n cluster-enabled redis-server processes,
// joins them into a cluster of n masters and returns their addresses; Main
// stops them.
func startRedisCluster(n int) ([]string, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, err
		}
	}
	dir, err := TempDir("cluster")
	if err != nil {
		return nil, err
	}
	var nodes []*RedisServer
	OnExit(func() {
		for _, s := range nodes {
			s.Stop()
		}
		os.RemoveAll(dir)
	})
	addrs := make([]string, 0, n)
	args := []string{"--cluster", "create"}
	for i := range n {
		d := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		s, err := newRedisServerOn(freeClusterPort, d, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(d, "nodes.conf"))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("quotatest: redis-cli --cluster create: %w: %s", err, out)
	}
	// Every node must see the cluster as ok, or the first commands that land
	// on a slow one get CLUSTERDOWN.
	deadline := time.Now().Add(15 * time.Second)
	for _, s := range nodes {
		for {
			out, _ := exec.Command("redis-cli", "-u", "redis://"+s.Addr, "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				return nil, errors.New("quotatest: cluster did not reach cluster_state:ok")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return addrs, nil
}

// freeClusterPort returns a free loopback port whose cluster bus port (the
// port plus 10000) is free as well: a node binds both, and fails to start
// where either is taken.
func freeClusterPort() (int, error) {
	for range 20 {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("quotatest: no free port with a free cluster bus port")
}

// waitPing waits until the server at addr answers, for up to timeout, or
// until exited is closed: the server is gone.
func waitPing(addr string, timeout time.Duration, exited <-chan struct{}) error {
	// Short timeouts: whatever holds a taken port may accept and never answer.
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("quotatest: redis at %s did not answer: %w", addr, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("quotatest: %w before it answered at %s", errExited, addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
