// Package quotatest gets the Redis servers that tests of code using quota
// run against: a shared server, a server of one test's own to stop, hang or
// restart, a Redis Cluster, and a primary with a replica under Sentinel.
//
// The shared server and the cluster come from an environment variable
// first (TEST_REDIS_URL, TEST_REDIS_CLUSTER_ADDRS); where it is unset, they
// are started from the redis-server on PATH once per test binary, shared
// by its tests and stopped by Main. Where no server can be had, the test
// fails with one line saying why and how to get one: a plain go test ./...
// prints only "ok" for a package whose tests skipped. TEST_SKIP_MISSING=1
// skips such tests instead.
//
// NewClient and NewClusterClient build a client with the options a
// production client of quota should have, so a test exercises what
// production runs. ExampleURL and ExampleClusterAddrs give the shared
// servers to Example functions, which have no testing.TB.
package quotatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by this package.
const (
	EnvRedisURL          = "TEST_REDIS_URL"           // redis://127.0.0.1:6379/0
	EnvRedisClusterAddrs = "TEST_REDIS_CLUSTER_ADDRS" // 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
	EnvSkipMissing       = "TEST_SKIP_MISSING"        // set: skip, not fail, a test whose server or tool is missing
)

// redisFix says how to get the shared server.
const redisFix = "apt-get install redis-server, or set " + EnvRedisURL

// RedisURL returns the URL of a Redis 7 server for tests.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(EnvRedisURL); u != "" {
		return u
	}
	return redisServer.get(tb, "Redis", redisFix, startLocalRedis)
}

// ExampleURL returns the URL RedisURL returns, for an Example function,
// which has no testing.TB to fail or skip. Where no server can be had it
// panics saying why and how to get one: an example cannot be skipped, so
// TEST_SKIP_MISSING does not apply. TestMain must call Main.
func ExampleURL() string {
	if u := os.Getenv(EnvRedisURL); u != "" {
		return u
	}
	u, err := redisServer.resolve("Redis", startLocalRedis)
	if err != nil {
		panic(fmt.Sprintf("quotatest: no Redis for the examples: %s; %v", redisFix, err))
	}
	return u
}

// NewClient returns a client of the Redis at url (a URL RedisURL returns)
// with the options production should use with quota: no retries (a retried
// charge could be counted twice; the caller decides what a failure means)
// and the context's deadline bounding every command. It is closed when tb
// ends.
func NewClient(tb testing.TB, url string) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("quotatest: %v", err)
	}
	opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
	c := redis.NewClient(opt)
	tb.Cleanup(func() { c.Close() })
	return c
}

// NewClusterClient returns a client of the Redis Cluster at addrs (seed
// addresses RedisClusterAddrs returns) with the options NewClient sets. It
// is closed when tb ends.
func NewClusterClient(tb testing.TB, addrs []string) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true})
	tb.Cleanup(func() { c.Close() })
	return c
}

// RedisClusterAddrs returns the seed addresses of a Redis Cluster with at
// least three masters: those in TEST_REDIS_CLUSTER_ADDRS, or else of one
// started from the redis-server on PATH, once per test binary.
func RedisClusterAddrs(tb testing.TB) []string {
	tb.Helper()
	if v := os.Getenv(EnvRedisClusterAddrs); v != "" {
		return strings.Split(v, ",")
	}
	return strings.Split(redisCluster.get(tb, "a Redis Cluster", clusterFix, startLocalCluster), ",")
}

// ExampleClusterAddrs returns the addresses RedisClusterAddrs returns, for
// an Example function: see ExampleURL.
func ExampleClusterAddrs() []string {
	if v := os.Getenv(EnvRedisClusterAddrs); v != "" {
		return strings.Split(v, ",")
	}
	u, err := redisCluster.resolve("a Redis Cluster", startLocalCluster)
	if err != nil {
		panic(fmt.Sprintf("quotatest: no Redis Cluster for the examples: %s; %v", clusterFix, err))
	}
	return strings.Split(u, ",")
}

// clusterFix says how to get the shared cluster.
const clusterFix = "apt-get install redis-server, or set " + EnvRedisClusterAddrs

// startLocalCluster starts the shared cluster, of three masters, and
// returns its addresses joined by commas.
func startLocalCluster(context.Context) (string, error) {
	addrs, err := startRedisCluster(3)
	return strings.Join(addrs, ","), err
}

var (
	redisServer  sharedServer
	redisCluster sharedServer
)

// inMain says Main runs the tests, and so will stop the servers.
var inMain atomic.Bool

// Main runs a package's tests and then stops the servers this package
// started for the whole binary. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(quotatest.Main(m)) }
//
// m is a *testing.M, or something that runs one and returns its code.
func Main(m interface{ Run() int }) int {
	inMain.Store(true)
	defer stopOwned()
	return m.Run()
}

// sharedServer is started once per test binary, the first time a test
// asks for it.
type sharedServer struct {
	once sync.Once
	url  string
	err  error
}

// errNotInMain is resolve's error when Main does not run the tests.
var errNotInMain = errors.New("nothing would stop it: TestMain must call quotatest.Main")

func (s *sharedServer) get(tb testing.TB, what, fix string, start func(context.Context) (string, error)) string {
	tb.Helper()
	u, err := s.resolve(what, start)
	switch {
	case errors.Is(err, errNotInMain):
		tb.Fatal(err)
	case err != nil:
		Unavailable(tb, what, fix, err)
	}
	return u
}

// resolve returns the server's URL, starting it the first time it is
// asked for.
func (s *sharedServer) resolve(what string, start func(context.Context) (string, error)) (string, error) {
	if !inMain.Load() {
		return "", fmt.Errorf("quotatest: %s would be started for this test binary, but %w", what, errNotInMain)
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s.url, s.err = start(ctx)
	})
	return s.url, s.err
}

// RequireCommand fails the test (or skips it under TEST_SKIP_MISSING) when
// name is not on PATH; install says how to get it.
func RequireCommand(tb testing.TB, name, install string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		Unavailable(tb, name, install, err)
	}
}

// Unavailable ends a test that lacks a server or a tool (what): it fails
// with how to get one (fix), how to skip instead and why there is none, or
// skips where TEST_SKIP_MISSING is set. A skip would not show in go test
// ./..., only under -v.
func Unavailable(tb testing.TB, what, fix string, why error) {
	tb.Helper()
	if os.Getenv(EnvSkipMissing) != "" {
		tb.Skipf("no %s: %s (%v)", what, fix, why)
	}
	tb.Fatalf("no %s: %s; or %s=1 to skip (%v)", what, fix, EnvSkipMissing, why)
}
