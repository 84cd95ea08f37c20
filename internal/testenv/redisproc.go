package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process owned by one test, for tests that
// must stop and restart their Redis (failure policy, NOSCRIPT recovery).
type RedisServer struct {
	Addr string
	dir  string
	args []string
	cmd  *exec.Cmd
}

// StartRedisServer starts a redis-server on a free loopback port, with no
// persistence, and stops it when tb ends. extra is appended to its arguments.
// It skips (or fails under TILEAPI_TEST_REQUIRE_SERVICES) where no
// redis-server binary is on PATH.
func StartRedisServer(tb testing.TB, extra ...string) *RedisServer {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable(tb, "redis-server", "PATH", err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: tb.TempDir()}
	s.args = append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", s.dir}, extra...)
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Start starts the server (again) on its address and waits until it answers.
func (s *RedisServer) Start() error {
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start redis-server: %w", err)
	}
	return waitPing(s.Addr, 10*time.Second)
}

// Stop kills the server at once, as a crash would.
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// StartRedisCluster starts n cluster-enabled redis-server processes, joins
// them into a cluster of n masters and returns their addresses.
func StartRedisCluster(tb testing.TB, n int) ([]string, error) {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, err
	}
	addrs := make([]string, n)
	for i := range addrs {
		dir := tb.TempDir()
		s := StartRedisServer(tb, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"))
		addrs[i] = s.Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("testenv: redis-cli --cluster create: %w: %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", strings.Split(addrs[0], ":")[1], "cluster", "info").Output()
		if strings.Contains(string(out), "cluster_state:ok") {
			return addrs, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, errors.New("testenv: cluster did not reach cluster_state:ok")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitPing(addr string, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
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
			return fmt.Errorf("testenv: redis at %s did not answer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
