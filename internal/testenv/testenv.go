// Package testenv finds the Redis and PostGIS servers that tileapi's tests
// run against.
//
// Each server comes from an environment variable first (that is how CI runs:
// see .ci/run). Where the variable is unset, the server is started once per
// test binary, shared by its tests and stopped by Main: with
// testcontainers-go where a Docker engine answers, else from the binaries on
// this machine (redis-server, through the engine's quotatest; initdb and
// postgres with PostGIS). TILEAPI_TEST_SERVICES=containers or =binaries
// allows only the one way. Servers of a test's own, the Redis Cluster and
// Sentinel come from quotatest's binaries, whatever TILEAPI_TEST_SERVICES
// says.
//
// Where no server can be had, the test fails with one line saying why and
// how to get one (quotatest.Unavailable); TEST_SKIP_MISSING=1 skips such
// tests instead.
//
// The containers run the upstream images redis:7-alpine and
// postgis/postgis:15-3.4-alpine, or the images named by
// TILEAPI_TEST_REDIS_IMAGE and TILEAPI_TEST_POSTGIS_IMAGE. .ci/containers
// runs the tests this way, against stand-ins of those images.
package testenv

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// Environment variables read by this package, beside quotatest's.
const (
	EnvDatabaseURL  = "TEST_DATABASE_URL"          // postgres://postgres@127.0.0.1:5432/tileapi_test
	EnvServices     = "TILEAPI_TEST_SERVICES"      // containers, binaries, or unset for both in that order
	EnvRedisImage   = "TILEAPI_TEST_REDIS_IMAGE"   // default redis:7-alpine
	EnvPostGISImage = "TILEAPI_TEST_POSTGIS_IMAGE" // default postgis/postgis:15-3.4-alpine
)

// RedisURL returns the URL of a Redis 7 server for tests: TEST_REDIS_URL,
// else a container, else the redis-server quotatest starts.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(quotatest.EnvRedisURL); u != "" {
		return u
	}
	containers, binaries := allowed(tb)
	if containers {
		u, err := redisContainer.start(tb, "Redis", startRedisContainer)
		if err == nil {
			return u
		}
		if !binaries {
			quotatest.Unavailable(tb, "Redis", "run Docker, or set "+quotatest.EnvRedisURL, err)
		}
	}
	return quotatest.RedisURL(tb)
}

// DatabaseURL returns the URL of a PostgreSQL database with the postgis
// extension created.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u
	}
	containers, binaries := allowed(tb)
	var failed []string
	for _, w := range []struct {
		name  string
		ok    bool
		start func(context.Context) (string, error)
	}{{"containers", containers, startPostGISContainer}, {"binaries", binaries, startLocalPostGIS}} {
		if !w.ok {
			continue
		}
		server := &postgisServers[0]
		if w.name == "binaries" {
			server = &postgisServers[1]
		}
		u, err := server.start(tb, "PostGIS", w.start)
		if err == nil {
			return u
		}
		failed = append(failed, w.name+": "+err.Error())
	}
	quotatest.Unavailable(tb, "PostGIS", "apt-get install postgresql-15-postgis-3, run Docker, or set "+EnvDatabaseURL,
		errors.New(strings.Join(failed, "; ")))
	return ""
}

var (
	redisContainer sharedServer
	postgisServers [2]sharedServer // from a container, from binaries
)

// inMain says Main runs the tests, and so will stop the servers.
var inMain atomic.Bool

// Main runs a package's tests and then stops the servers this package and
// quotatest started for the whole binary. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
//
// m is a *testing.M, or something that runs one and returns its code.
func Main(m interface{ Run() int }) int {
	inMain.Store(true)
	return quotatest.Main(m) // which stops what was started with quotatest.OnExit
}

// sharedServer is started once per test binary, the first time a test
// asks for it.
type sharedServer struct {
	once sync.Once
	url  string
	err  error
}

func (s *sharedServer) start(tb testing.TB, what string, start func(context.Context) (string, error)) (string, error) {
	tb.Helper()
	if !inMain.Load() {
		tb.Fatalf("testenv: %s would be started for this test binary, but nothing would stop it: TestMain must call testenv.Main", what)
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s.url, s.err = start(ctx)
	})
	return s.url, s.err
}

// allowed returns the ways TILEAPI_TEST_SERVICES allows: both where it is
// unset, containers first.
func allowed(tb testing.TB) (containers, binaries bool) {
	tb.Helper()
	switch only := os.Getenv(EnvServices); only {
	case "":
		return true, true
	case "containers":
		return true, false
	case "binaries":
		return false, true
	default:
		tb.Fatalf("testenv: %s=%q allows no way: want containers or binaries", EnvServices, only)
		return false, false
	}
}
