package quotatest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "crash" {
		crashHelper()
		return
	}
	os.Exit(Main(m))
}

// envHelper makes the test binary play a test binary under test: see
// crashHelper and TestHelperNeedsRedis.
const envHelper = "TESTENV_HELPER"

// The servers started from this machine's binaries answer, and are gone,
// directory and all, once Main's cleanup has run.
func TestLocalServersStopAtExit(t *testing.T) {
	ctx := context.Background()
	before := ownDirs()
	redisURL, err := startLocalRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dirs := slices.DeleteFunc(ownDirs(), func(d string) bool { return slices.Contains(before, d) })
	if len(dirs) != 1 {
		t.Fatalf("this binary's directories: %q, want one for Redis", dirs)
	}
	if err := pingRedis(ctx, redisURL); err != nil {
		t.Fatalf("self-started Redis: %v", err)
	}

	stopOwned()
	if err := pingRedis(ctx, redisURL); err == nil {
		t.Error("Redis still answers after cleanup")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left after cleanup (%v)", d, err)
		}
	}
}

// Without TEST_REDIS_CLUSTER_ADDRS, a cluster of three masters is started
// from redis-server, and takes writes.
func TestClusterFromBinaries(t *testing.T) {
	t.Setenv(EnvRedisClusterAddrs, "")
	addrs := RedisClusterAddrs(t)
	if len(addrs) != 3 {
		t.Fatalf("cluster addresses %q, want 3", addrs)
	}
	c := NewClusterClient(t, addrs)
	ctx := context.Background()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
		t.Fatalf("CLUSTER INFO: %v\n%s", err, info)
	}
	if err := c.Set(ctx, "quotatest:cluster", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

// NewClient's and NewClusterClient's clients never retry a command and
// bound every read and write by the context's deadline, as production's.
// (go-redis keeps a MaxRetries of -1 as 0 retries, and a default as 3.)
func TestClientOptions(t *testing.T) {
	s := StartRedisServer(t)
	c := NewClient(t, s.URL())
	if o := c.Options(); o.Addr != s.Addr || o.MaxRetries != 0 || !o.ContextTimeoutEnabled {
		t.Errorf("NewClient: Addr %q, MaxRetries %d, ContextTimeoutEnabled %t; want %q, 0, true",
			o.Addr, o.MaxRetries, o.ContextTimeoutEnabled, s.Addr)
	}
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	cc := NewClusterClient(t, []string{s.Addr})
	if o := cc.Options(); o.MaxRetries > 0 || !o.ContextTimeoutEnabled {
		t.Errorf("NewClusterClient: MaxRetries %d, ContextTimeoutEnabled %t; want none, true", o.MaxRetries, o.ContextTimeoutEnabled)
	}
}

// A test binary killed before Main can clean up takes its servers with it
// (parent-death signal), and the next binary removes its directories.
func TestKilledBinaryLeavesNothing(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=crash")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	// While the helper lives its directory is there: no sweep takes the
	// directory of a binary still running. Once it is dead, any binary's
	// first TempDir may sweep it (other test binaries run at the same
	// time); this one's sweep certainly does.
	prefix := fmt.Sprintf("%s/%s%d-", os.TempDir(), tempPrefix, cmd.Process.Pid)
	left := func() []string { return globDirs(prefix) }
	sweepTempDirs()
	alive := left()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	var redisURL string
	if _, err2 := fmt.Sscan(line, &redisURL); err != nil || err2 != nil {
		t.Fatalf("helper said %q (%v, %v)", line, err, err2)
	}
	if len(alive) != 1 {
		t.Fatalf("the running helper has %q, want its directory, kept through a sweep", alive)
	}

	ctx := context.Background()
	if !eventually(func() bool { return pingRedis(ctx, redisURL) != nil }) {
		t.Error("the killed binary's Redis still answers")
	}
	sweepTempDirs()
	if d := left(); len(d) != 0 {
		t.Errorf("after the sweep: %q", d)
	}
}

// crashHelper starts a server, prints its URL and waits to be killed.
func crashHelper() {
	ctx := context.Background()
	redisURL, err := startLocalRedis(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(redisURL)
	select {}
}

// A test whose server cannot be had fails with how to get one, so that a
// plain go test ./... says FAIL; TEST_SKIP_MISSING=1 skips it.
func TestMissingServerFailsUnlessSkipped(t *testing.T) {
	run := func(extra ...string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNeedsRedis$", "-test.v")
		cmd.Env = append(withoutEnv(EnvRedisURL, EnvSkipMissing, "PATH"),
			append([]string{envHelper + "=needs-redis", "PATH=" + t.TempDir()}, extra...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err == nil || !strings.Contains(out, "--- FAIL: TestHelperNeedsRedis") ||
		!strings.Contains(out, "apt-get install redis-server") || !strings.Contains(out, "or "+EnvSkipMissing+"=1 to skip") {
		t.Errorf("without redis-server: %v\n%s", err, out)
	}
	out, err = run(EnvSkipMissing + "=1")
	if err != nil || !strings.Contains(out, "--- SKIP: TestHelperNeedsRedis") {
		t.Errorf("without redis-server, with %s=1: %v\n%s", EnvSkipMissing, err, out)
	}
}

// TestHelperNeedsRedis is the test TestMissingServerFailsUnlessSkipped
// runs in a test binary of its own; elsewhere it does nothing.
func TestHelperNeedsRedis(t *testing.T) {
	if os.Getenv(envHelper) != "needs-redis" {
		return
	}
	RedisURL(t)
	t.Error("RedisURL returned with no way to get a Redis")
}

func pingRedis(ctx context.Context, url string) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	defer c.Close()
	return c.Ping(ctx).Err()
}

// ownDirs lists this binary's server directories.
func ownDirs() []string {
	return globDirs(fmt.Sprintf("%s/%s%d-", os.TempDir(), tempPrefix, os.Getpid()))
}

func globDirs(prefix string) []string {
	entries, _ := os.ReadDir(os.TempDir())
	var dirs []string
	for _, e := range entries {
		if p := os.TempDir() + "/" + e.Name(); strings.HasPrefix(p, prefix) {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

// eventually reports whether cond holds within ten seconds: a killed
// process's children get their signal at once, but take a moment to end.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func withoutEnv(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			env = append(env, kv)
		}
	}
	return env
}

// A server whose port was taken between asking and binding exits at once:
// the start notices at once, not after the ping timeout, and tries another
// port.
func TestServerStartsOnAnotherPortWhenItsIsTaken(t *testing.T) {
	RequireCommand(t, "redis-server", "apt-get install redis-server")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ports := []int{taken.Addr().(*net.TCPAddr).Port}
	asked := 0
	freePort := func() (int, error) {
		asked++
		if len(ports) > 0 {
			p := ports[0]
			ports = ports[1:]
			return p, nil
		}
		return FreePort()
	}
	s, err := newRedisServerOn(freePort, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if asked != 2 {
		t.Errorf("asked for %d ports, want 2 (the taken one, then another)", asked)
	}
	if s.Addr == taken.Addr().String() {
		t.Errorf("started on the taken port %s", s.Addr)
	}
	if err := pingRedis(context.Background(), s.URL()); err != nil {
		t.Fatal(err)
	}

	// On the taken port alone, the start fails as an exit, not a timeout.
	lone := &RedisServer{Addr: taken.Addr().String(), args: []string{"--bind", "127.0.0.1",
		"--port", strconv.Itoa(taken.Addr().(*net.TCPAddr).Port), "--save", "", "--dir", t.TempDir()}}
	if err := lone.Start(); !errors.Is(err, errExited) {
		lone.Stop()
		t.Errorf("start on a taken port: %v, want errExited", err)
	}
}
