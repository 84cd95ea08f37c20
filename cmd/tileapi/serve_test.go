package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// syncBuffer is a bytes.Buffer safe for a server goroutine to write while
// the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// instance is one `tileapi serve` running in this process through run.
type instance struct {
	url, adminURL  string // the public listener and the admin one
	stdout, stderr *syncBuffer
	done           chan error
}

// startServe runs `tileapi serve` with env on a free port, and its admin
// listener on another, waits until both answer /healthz, and stops it when
// the test ends.
func startServe(t *testing.T, env map[string]string) *instance {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{url: "http://" + addr, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	getenv := func(k string) string { return env[k] }
	go func() {
		in.done <- run(ctx, []string{"tileapi", "-addr", addr, "-admin-addr", "127.0.0.1:0"}, getenv, in.stdout, in.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-in.done; err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(in.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if in.adminURL = adminURL(in.stderr.String()); in.adminURL != "" {
				return in
			}
		}
		select {
		case err := <-in.done:
			in.done <- err // for the cleanup, which waits on it
			t.Fatalf("serve exited: %v\n%s", err, in.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v\n%s", err, in.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminURL is the admin listener's URL in a serve log, once it is serving.
func adminURL(log string) string {
	for _, line := range strings.Split(log, "\n") {
		var l struct{ Msg, Listener, Addr string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "serving" && l.Listener == "admin" {
			return "http://" + l.Addr
		}
	}
	return ""
}

// With no configuration at all, `tileapi` serves the bundled data from
// memory at once, prints its demo keys, and says its quotas hold per process.
func TestServeEmbedded(t *testing.T) {
	in := startServe(t, map[string]string{})
	if !strings.Contains(in.stdout.String(), "demo key demo-free (plan free)") {
		t.Errorf("stdout lacks the demo keys:\n%s", in.stdout)
	}
	for _, want := range []string{"quotas are held in this process and hold per process only", "serving the bundled dataset from memory"} {
		if !strings.Contains(in.stderr.String(), want) {
			t.Errorf("startup log lacks %q:\n%s", want, in.stderr)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, in.url+"/v1/tiles/countries/1/1/0.mvt", nil)
	req.Header.Set("X-API-Key", "demo-free")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Cost") == "" {
		t.Errorf("tile: status %d, cost %q", resp.StatusCode, resp.Header.Get("X-RateLimit-Cost"))
	}
	if strings.Contains(in.stderr.String(), "demo-free") {
		t.Error("the log holds a key")
	}
	if strings.Contains(in.stderr.String(), noInFlightLimit) {
		t.Error("the log says a compiled-in plan has no in-flight limit")
	}
}

// Two servers sharing one Redis hold one limit exactly under concurrent
// load with mixed costs: the costs they admit, together, fill the limit and
// never pass it.
func TestTwoServersShareOneLimit(t *testing.T) {
	redisSrv := quotatest.StartRedisServer(t) // a Redis of this test's own: the key ids repeat across runs
	plansFile := filepath.Join(t.TempDir(), "plans.json")
	const max = 60
	err := os.WriteFile(plansFile, []byte(fmt.Sprintf(`{"plans": [{"name": "shared", "max_radius_m": 20000,
		"limits": [{"name": "minute", "max": %d, "window": "1m"}]}]}`, max)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"REDIS_URL":          "redis://" + redisSrv.Addr,
		"TILEAPI_PLANS_FILE": plansFile,
		"TILEAPI_DEMO_KEYS":  "shared-key:shared",
		// This test is about sharing, not budgets: a loaded machine must
		// not turn charges into unmetered answers (fail-open) it cannot
		// count.
		"TILEAPI_QUOTA_TIMEOUT": "5s",
		"TILEAPI_QUOTA_FAILURE": "closed",
	}
	servers := []*instance{startServe(t, env), startServe(t, env)}

	// Radii of 2, 4 and 6 km cost 1, 4 and 9 units.
	radii := []string{"2000", "4000", "6000"}
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := servers[g%2].url
			for i := g; time.Now().Before(deadline); i++ {
				req, _ := http.NewRequest(http.MethodGet, url+"/v1/geofence/within?lng=13.4&lat=52.5&limit=1&radius="+radii[i%3], nil)
				req.Header.Set("X-API-Key", "shared-key")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					c, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
					admitted.Add(c)
				case http.StatusTooManyRequests:
					denied.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("admitted %d units of %d across two servers; %d requests denied", admitted.Load(), max, denied.Load())
	if admitted.Load() > max {
		t.Errorf("two servers admitted %d units, over the limit of %d", admitted.Load(), max)
	}
	if admitted.Load() < max-8 || denied.Load() == 0 {
		t.Errorf("admitted %d units with %d denials: the limit was not reached", admitted.Load(), denied.Load())
	}
}

// With a database, serve needs loaded data, serves it from PostGIS with keys
// created by `tileapi keys create`, and reports the database in the admin
// listener's /readyz.
func TestServePostGIS(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	getenv := func(k string) string { return env[k] }

	migrate(t, getenv)
	// Not loaded yet: serve refuses, saying what to do.
	var out bytes.Buffer
	err := run(ctx, []string{"tileapi", "serve", "-addr", "127.0.0.1:0"}, getenv, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "run tileapi load") {
		t.Fatalf("serve before load: %v", err)
	}
	loadParis(t, getenv)
	secret := createKey(t, getenv, "free")

	in := startServe(t, env)
	req, _ := http.NewRequest(http.MethodGet, in.url+"/v1/geofence/within?lng=2.35&lat=48.85&radius=1000", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"Paris"`) {
		t.Errorf("within: status %d: %s", resp.StatusCode, body)
	}
	resp, err = http.Get(in.adminURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"database":"ok"`) {
		t.Errorf("readyz: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(in.stderr.String(), secret) {
		t.Error("the log holds the secret")
	}
}

// migrate runs tileapi migrate on the database getenv names.
func migrate(t *testing.T, getenv func(string) string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"tileapi", "migrate"}, getenv, &out, &out); err != nil {
		t.Fatalf("migrate: %v\n%s", err, &out)
	}
}

// loadParis runs tileapi load with one place, Paris, and the bundled
// fences, on the migrated database getenv names.
func loadParis(t *testing.T, getenv func(string) string) {
	t.Helper()
	places := filepath.Join(t.TempDir(), "places.csv")
	if err := os.WriteFile(places, []byte("geonameid,name,country,admin_code,feature_code,population,lon,lat\n"+
		"2988507,Paris,FR,11,PPLC,2138551,2.3488,48.85341\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"tileapi", "load", "-places", places}, getenv, &out, &out); err != nil {
		t.Fatalf("load: %v\n%s", err, &out)
	}
}

// createKey runs tileapi keys create on plan and returns the key's secret.
func createKey(t *testing.T, getenv func(string) string, plan string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"tileapi", "keys", "create", "-plan", plan}, getenv, &out, &out); err != nil {
		t.Fatalf("keys create: %v\n%s", err, &out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// The unknown-key guard's limit comes from -unknown-keys, else
// TILEAPI_UNKNOWN_KEYS, else the default; 0 and text are refused.
func TestParseServeUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want int64
		err  bool
	}{
		{want: httpapi.DefaultUnknownKeys},
		{env: "7", want: 7},
		{env: "7", args: []string{"-unknown-keys", "-1"}, want: -1},
		{env: "0", err: true},
		{env: "many", err: true},
		{args: []string{"-unknown-keys", "0"}, err: true},
	} {
		getenv := func(name string) string {
			if name == "TILEAPI_UNKNOWN_KEYS" {
				return tc.env
			}
			return ""
		}
		c, err := parseServe(tc.args, getenv, io.Discard)
		switch {
		case tc.err && err == nil:
			t.Errorf("env %q, args %q: no error", tc.env, tc.args)
		case !tc.err && err != nil:
			t.Errorf("env %q, args %q: %v", tc.env, tc.args, err)
		case !tc.err && c.unknownKeys != tc.want:
			t.Errorf("env %q, args %q: %d, want %d", tc.env, tc.args, c.unknownKeys, tc.want)
		}
	}
}

// An unreachable REDIS_URL at startup is said loudly, shown by the admin
// listener's /readyz (still ready under fail-open, which serves
// unmetered), and with TILEAPI_REQUIRE_REDIS refuses to start. Every log
// line, go-redis's included, is one JSON object.
func TestServeRedisUnreachable(t *testing.T) {
	dead := "redis://127.0.0.1:1/0"
	in := startServe(t, map[string]string{"REDIS_URL": dead})
	if !strings.Contains(in.stderr.String(), "REDIS_URL does not answer at startup: requests are served UNMETERED") {
		t.Errorf("no loud startup warning:\n%s", in.stderr)
	}
	resp, err := http.Get(in.adminURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"degraded":["redis"]`) {
		t.Errorf("/readyz with Redis down under fail-open: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, in.url+"/v1/geofence/contains?lng=2.35&lat=48.85", nil)
	req.Header.Set("X-API-Key", "demo-free")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Quota-Status") != "unmetered-pending" {
		t.Errorf("a request with Redis down: %d, X-Quota-Status %q", resp.StatusCode, resp.Header.Get("X-Quota-Status"))
	}
	for _, line := range strings.Split(strings.TrimSpace(in.stderr.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}

	err = run(context.Background(), []string{"tileapi", "serve", "-addr", "127.0.0.1:0"},
		func(k string) string { return map[string]string{"REDIS_URL": dead, "TILEAPI_REQUIRE_REDIS": "1"}[k] },
		io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "REDIS_URL does not answer") {
		t.Errorf("with TILEAPI_REQUIRE_REDIS: %v, want a refusal to start", err)
	}
}

// serve on a database without the schema, or without data, says what to
// run.
func TestServeUnpreparedDatabase(t *testing.T) {
	migrated := spatialtest.Migrated(t)
	for _, tc := range []struct{ name, url, want string }{
		{"unmigrated", spatialtest.Schema(t), "run tileapi migrate && tileapi load"},
		{"unloaded", migrated.Config().ConnString(), "no data loaded: run tileapi load"},
	} {
		err := run(context.Background(), []string{"tileapi", "serve", "-addr", "127.0.0.1:0"},
			func(k string) string { return map[string]string{"DATABASE_URL": tc.url}[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The server takes 16 KiB of request headers, as the README says, and
// answers more with 431.
func TestHeaderLimit(t *testing.T) {
	in := startServe(t, map[string]string{})
	for _, tc := range []struct {
		size   int
		status int
	}{{15 << 10, http.StatusOK}, {17 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, _ := http.NewRequest(http.MethodGet, in.url+"/healthz", nil)
		req.Header.Set("X-Padding", strings.Repeat("x", tc.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%d bytes of headers: status %d, want %d", tc.size, resp.StatusCode, tc.status)
		}
	}
	if !strings.Contains(in.stderr.String(), `"duration_ms":`) {
		t.Errorf("the request log has no duration_ms:\n%s", in.stderr)
	}
}

// -pprof-addr opens Go's profiles on their own listener, and only there.
func TestPprofListener(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	if err := servePprof(ctx, "127.0.0.1:0", slog.New(slog.NewJSONHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Addr string `json:"pprof_addr"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line.Addr == "" {
		t.Fatalf("log %q: no pprof_addr (%v)", logs.String(), err)
	}
	resp, err := http.Get("http://" + line.Addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("goroutine profile")) {
		t.Errorf("status %d, body %.80q", resp.StatusCode, body)
	}
	cancel()
	for range 50 {
		if _, err = http.Get("http://" + line.Addr + "/debug/pprof/"); err != nil {
			return // closed with its context
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("the profile listener outlived its context")
}

// TILEAPI_USAGE=off records no usage history, and nothing else changes:
// the same tile is served and charged, and /v1/usage answers, with no
// rows; on (the default), the tile is in the history.
func TestServeUsageOff(t *testing.T) {
	for _, tc := range []struct {
		env  string
		rows int
	}{{"", 1}, {"off", 0}} {
		t.Run("TILEAPI_USAGE="+tc.env, func(t *testing.T) {
			in := startServe(t, map[string]string{"TILEAPI_USAGE": tc.env})
			get := func(path string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest(http.MethodGet, in.url+path, nil)
				req.Header.Set("X-API-Key", "demo-free")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { resp.Body.Close() })
				return resp
			}
			if resp := get("/v1/tiles/countries/1/1/0.mvt"); resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Cost") == "" {
				t.Fatalf("tile: status %d, cost %q", resp.StatusCode, resp.Header.Get("X-RateLimit-Cost"))
			}
			resp := get("/v1/usage")
			var u struct {
				Rows []json.RawMessage `json:"rows"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&u); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/v1/usage: status %d, %v", resp.StatusCode, err)
			}
			if len(u.Rows) != tc.rows {
				t.Errorf("/v1/usage: %d rows, want %d", len(u.Rows), tc.rows)
			}
		})
	}
}
