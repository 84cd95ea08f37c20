// Package testenv finds the Redis and PostGIS servers that tests run against.
//
// Each server comes from an environment variable first (that is how CI runs:
// see .ci/run). Where the variable is unset and a Docker engine answers, the
// server is started once per test binary with testcontainers-go and reused by
// every test in it. Where neither is possible the test is skipped with a
// message naming the variable to set, unless TILEAPI_TEST_REQUIRE_SERVICES is
// set, in which case it fails: nothing that needs a server may skip in CI.
//
// The containers run the upstream images redis:7-alpine and
// postgis/postgis:15-3.4-alpine, or the images named by
// TILEAPI_TEST_REDIS_IMAGE and TILEAPI_TEST_POSTGIS_IMAGE. .ci/containers
// runs the tests this way, against stand-ins of those images.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Environment variables read by this package.
const (
	EnvRedisURL          = "TEST_REDIS_URL"           // redis://127.0.0.1:6379/0
	EnvRedisClusterAddrs = "TEST_REDIS_CLUSTER_ADDRS" // 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
	EnvDatabaseURL       = "TEST_DATABASE_URL"        // postgres://postgres@127.0.0.1:5432/tileapi_test
	EnvRequireServices   = "TILEAPI_TEST_REQUIRE_SERVICES"
	EnvRedisImage        = "TILEAPI_TEST_REDIS_IMAGE"   // default redis:7-alpine
	EnvPostGISImage      = "TILEAPI_TEST_POSTGIS_IMAGE" // default postgis/postgis:15-3.4-alpine
)

// image returns the image named by the environment variable env, or def.
// The defaults are the upstream images; the variables let a machine that
// cannot pull them use images of its own.
func image(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// RedisURL returns the URL of a Redis 7 server for tests.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(EnvRedisURL); u != "" {
		return u
	}
	u, err := redisContainer.get(startRedis)
	if err != nil {
		unavailable(tb, "Redis", EnvRedisURL, err)
	}
	return u
}

// DatabaseURL returns the URL of a PostgreSQL database with the postgis
// extension created.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u
	}
	u, err := postgisContainer.get(startPostGIS)
	if err != nil {
		unavailable(tb, "PostGIS", EnvDatabaseURL, err)
	}
	return u
}

// RedisClusterAddrs returns the seed addresses of a Redis Cluster with at
// least three masters. With no TEST_REDIS_CLUSTER_ADDRS it starts one, once
// per test binary, from the redis-server on PATH; Main stops it.
func RedisClusterAddrs(tb testing.TB) []string {
	tb.Helper()
	if v := os.Getenv(EnvRedisClusterAddrs); v != "" {
		return strings.Split(v, ",")
	}
	cluster.once.Do(func() {
		dir, err := os.MkdirTemp("", "tileapi-cluster-")
		if err != nil {
			cluster.err = err
			return
		}
		cluster.dir = dir
		cluster.nodes, cluster.err = startRedisCluster(dir, 3)
	})
	if cluster.err != nil {
		unavailable(tb, "a Redis Cluster", EnvRedisClusterAddrs, cluster.err)
	}
	addrs := make([]string, len(cluster.nodes))
	for i, n := range cluster.nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// cluster is the Redis Cluster this test binary started, if any.
var cluster struct {
	once  sync.Once
	dir   string
	nodes []*RedisServer
	err   error
}

// Main runs a package's tests and then stops the servers this package
// started for the whole binary. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	for _, n := range cluster.nodes {
		n.Stop()
	}
	if cluster.dir != "" {
		os.RemoveAll(cluster.dir)
	}
	return code
}

// RequireCommand skips the test (or fails it under
// TILEAPI_TEST_REQUIRE_SERVICES) when name is not on PATH; install says how
// to get it.
func RequireCommand(tb testing.TB, name, install string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		msg := fmt.Sprintf("%s is not available: %s (%v)", name, install, err)
		if os.Getenv(EnvRequireServices) != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
}

func unavailable(tb testing.TB, what, env string, err error) {
	tb.Helper()
	msg := fmt.Sprintf("%s is not available: set %s (%v)", what, env, err)
	if os.Getenv(EnvRequireServices) != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// lazyContainer starts one container per test binary, the first time a test
// asks for it; the testcontainers reaper (Ryuk) removes it when the binary
// exits. Where the reaper is disabled (TESTCONTAINERS_RYUK_DISABLED=true),
// whoever disabled it removes the containers, labelled org.testcontainers.
type lazyContainer struct {
	once sync.Once
	url  string
	err  error
}

var (
	redisContainer   lazyContainer
	postgisContainer lazyContainer
)

func (c *lazyContainer) get(start func(context.Context) (string, error)) (string, error) {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c.url, c.err = start(ctx)
	})
	return c.url, c.err
}

func startRedis(ctx context.Context) (string, error) {
	redisImage := image(EnvRedisImage, "redis:7-alpine")
	ctr, err := testcontainers.Run(ctx, redisImage,
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithCmd("redis-server", "--save", "", "--appendonly", "no"),
		testcontainers.WithWaitStrategy(wait.ForListeningPort("6379/tcp")),
	)
	if err != nil {
		return "", fmt.Errorf("testenv: start %s: %w", redisImage, err)
	}
	ep, err := ctr.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		return "", fmt.Errorf("testenv: redis endpoint: %w", err)
	}
	return "redis://" + ep + "/0", nil
}

func startPostGIS(ctx context.Context) (string, error) {
	postgisImage := image(EnvPostGISImage, "postgis/postgis:15-3.4-alpine")
	ctr, err := testcontainers.Run(ctx, postgisImage,
		testcontainers.WithExposedPorts("5432/tcp"),
		testcontainers.WithEnv(map[string]string{
			"POSTGRES_PASSWORD": "postgres",
			"POSTGRES_DB":       "tileapi_test",
		}),
		// The image restarts the server once after its init scripts (which
		// create the postgis extension), so wait for the second "ready".
		testcontainers.WithWaitStrategy(wait.ForLog("database system is ready to accept connections").
			WithOccurrence(2).WithStartupTimeout(2*time.Minute)),
	)
	if err != nil {
		return "", fmt.Errorf("testenv: start %s: %w", postgisImage, err)
	}
	ep, err := ctr.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		return "", fmt.Errorf("testenv: postgis endpoint: %w", err)
	}
	return "postgres://postgres:postgres@" + ep + "/tileapi_test?sslmode=disable", nil
}
