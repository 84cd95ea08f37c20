// Package testenv finds the Redis and PostGIS servers that tests run against.
//
// Each server comes from an environment variable first (that is how CI runs:
// see .ci/run). Where the variable is unset, the server is started once per
// test binary, shared by its tests and stopped by Main: with
// testcontainers-go where a Docker engine answers, else from the binaries on
// this machine (redis-server; initdb and postgres with PostGIS). The Redis
// Cluster always comes from redis-server. TILEAPI_TEST_SERVICES=containers
// or =binaries allows only the one way.
//
// Where no server can be had, the test fails with one line saying why and
// how to get one: a plain go test ./... prints only "ok" for a package whose
// tests skipped. TILEAPI_TEST_SKIP_MISSING=1 skips such tests instead.
//
// The containers run the upstream images redis:7-alpine and
// postgis/postgis:15-3.4-alpine, or the images named by
// TILEAPI_TEST_REDIS_IMAGE and TILEAPI_TEST_POSTGIS_IMAGE. .ci/containers
// runs the tests this way, against stand-ins of those images.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Environment variables read by this package.
const (
	EnvRedisURL          = "TEST_REDIS_URL"             // redis://127.0.0.1:6379/0
	EnvRedisClusterAddrs = "TEST_REDIS_CLUSTER_ADDRS"   // 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
	EnvDatabaseURL       = "TEST_DATABASE_URL"          // postgres://postgres@127.0.0.1:5432/tileapi_test
	EnvSkipMissing       = "TILEAPI_TEST_SKIP_MISSING"  // set: skip, not fail, a test whose server or tool is missing
	EnvServices          = "TILEAPI_TEST_SERVICES"      // containers, binaries, or unset for both in that order
	EnvRedisImage        = "TILEAPI_TEST_REDIS_IMAGE"   // default redis:7-alpine
	EnvPostGISImage      = "TILEAPI_TEST_POSTGIS_IMAGE" // default postgis/postgis:15-3.4-alpine
)

// RedisURL returns the URL of a Redis 7 server for tests.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(EnvRedisURL); u != "" {
		return u
	}
	return redisServer.get(tb, "Redis", "apt-get install redis-server, run Docker, or set "+EnvRedisURL,
		allowed(way{"containers", startRedisContainer}, way{"binaries", startLocalRedis}))
}

// DatabaseURL returns the URL of a PostgreSQL database with the postgis
// extension created.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u
	}
	return postgisServer.get(tb, "PostGIS", "apt-get install postgresql-15-postgis-3, run Docker, or set "+EnvDatabaseURL,
		allowed(way{"containers", startPostGISContainer}, way{"binaries", startLocalPostGIS}))
}

// RedisClusterAddrs returns the seed addresses of a Redis Cluster with at
// least three masters: those in TEST_REDIS_CLUSTER_ADDRS, or else of one
// started from the redis-server on PATH, once per test binary, whatever
// TILEAPI_TEST_SERVICES says (there is no cluster container).
func RedisClusterAddrs(tb testing.TB) []string {
	tb.Helper()
	if v := os.Getenv(EnvRedisClusterAddrs); v != "" {
		return strings.Split(v, ",")
	}
	u := redisCluster.get(tb, "a Redis Cluster", "apt-get install redis-server, or set "+EnvRedisClusterAddrs,
		[]way{{"binaries", func(context.Context) (string, error) {
			addrs, err := startRedisCluster(3)
			return strings.Join(addrs, ","), err
		}}})
	return strings.Split(u, ",")
}

var (
	redisServer   sharedServer
	postgisServer sharedServer
	redisCluster  sharedServer
)

// inMain says Main runs the tests, and so will stop the servers.
var inMain atomic.Bool

// Main runs a package's tests and then stops the servers this package
// started for the whole binary. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
//
// m is a *testing.M, or something that runs one and returns its code.
func Main(m interface{ Run() int }) int {
	inMain.Store(true)
	defer stopOwned()
	return m.Run()
}

// A way to get a server: "containers" or "binaries", and how.
type way struct {
	name  string
	start func(context.Context) (string, error)
}

// sharedServer is started once per test binary, the first time a test
// asks for it, by the first of its ways that works.
type sharedServer struct {
	once sync.Once
	url  string
	err  error
}

func (s *sharedServer) get(tb testing.TB, what, fix string, ways []way) string {
	tb.Helper()
	if !inMain.Load() {
		tb.Fatalf("testenv: %s would be started for this test binary, but nothing would stop it: TestMain must call testenv.Main", what)
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s.url, s.err = startFirst(ctx, ways)
	})
	if s.err != nil {
		Unavailable(tb, what, fix, s.err)
	}
	return s.url
}

// allowed returns the ways TILEAPI_TEST_SERVICES allows, in order: all of
// them where it is unset.
func allowed(ways ...way) []way {
	only := os.Getenv(EnvServices)
	if only == "" {
		return ways
	}
	return slices.DeleteFunc(ways, func(w way) bool { return w.name != only })
}

// startFirst tries the ways in order and returns the first server started,
// or why each way failed.
func startFirst(ctx context.Context, ways []way) (string, error) {
	if len(ways) == 0 {
		return "", fmt.Errorf("%s=%q allows no way: want containers or binaries", EnvServices, os.Getenv(EnvServices))
	}
	var failed []string
	for _, w := range ways {
		u, err := w.start(ctx)
		if err == nil {
			return u, nil
		}
		failed = append(failed, w.name+": "+err.Error())
	}
	return "", errors.New(strings.Join(failed, "; "))
}

// RequireCommand fails the test (or skips it under TILEAPI_TEST_SKIP_MISSING)
// when name is not on PATH; install says how to get it.
func RequireCommand(tb testing.TB, name, install string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		Unavailable(tb, name, install, err)
	}
}

// Unavailable ends a test that lacks a server or a tool (what): it fails
// with how to get one (fix), how to skip instead and why there is none, or
// skips where TILEAPI_TEST_SKIP_MISSING is set. A skip would not show in
// go test ./..., only under -v.
func Unavailable(tb testing.TB, what, fix string, why error) {
	tb.Helper()
	if os.Getenv(EnvSkipMissing) != "" {
		tb.Skipf("no %s: %s (%v)", what, fix, why)
	}
	tb.Fatalf("no %s: %s; or %s=1 to skip (%v)", what, fix, EnvSkipMissing, why)
}
