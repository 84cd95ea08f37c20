package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// judge must fail a key whose log breaks a window, whose log and 200s
// disagree, or whose 429s were not due.
func TestJudge(t *testing.T) {
	const s = int64(time.Second / time.Microsecond)
	limits := []Limit{{Name: "burst", Window: time.Second, Max: 10}}
	ok := []Result{
		{Key: 0, Status: http.StatusOK, Cost: 6},
		{Key: 0, Status: http.StatusOK, Cost: 4},
		{Key: 0, Status: http.StatusTooManyRequests, Cost: 4, Remaining: 0, Limit: "burst"},
		{Key: 1, Status: http.StatusOK, Cost: 16}, // another key's
	}
	for _, tc := range []struct {
		name    string
		adm     []Admission
		results []Result
		problem string // "" for a pass
	}{
		{"exact", []Admission{{s, 6}, {s + s/2, 4}}, ok, ""},
		{"a window over the max", []Admission{{s, 6}, {s + s/2, 4}, {s + s/2 + 1, 1}},
			append(ok, Result{Key: 0, Status: http.StatusOK, Cost: 1}), `"burst" (10 per 1s): 1 trailing windows over the max`},
		{"a 200 missing from the log", []Admission{{s, 6}}, ok, "Redis logged 1 admissions costing 6; the clients received 2 200s costing 10"},
		{"a charge made after the server gave up: a 503 and an extra entry", []Admission{{s, 6}, {s + s/2, 4}, {3 * s, 1}},
			append(ok, Result{Key: 0, Status: http.StatusServiceUnavailable, Code: codeUnavailable}), ""},
		{"a 200 settled down, an empty tile", []Admission{{s, 6}, {s + s/2, 4}, {3 * s, 1}},
			append(ok, Result{Key: 0, Status: http.StatusOK, Cost: 16, Settled: 1}), ""},
		{"an extra entry with no 503", []Admission{{s, 6}, {s + s/2, 4}, {3 * s, 1}}, ok, "Redis logged 3 admissions costing 11"},
		{"served unmetered", []Admission{{s, 6}, {s + s/2, 4}},
			append(ok, Result{Key: 0, Status: http.StatusOK, Quota: "unmetered"}), "1 requests were served unmetered"},
		{"a 429 with room", []Admission{{s, 6}, {s + s/2, 4}},
			append(ok, Result{Key: 0, Status: http.StatusTooManyRequests, Cost: 2, Remaining: 2, Limit: "burst"}), "1 429s had room"},
		{"denied but never filled", []Admission{{s, 6}, {3 * s, 4}}, ok, `limit "burst" denied 1 requests, yet no window admitted more than 10 - 4`},
		{"a failed request", []Admission{{s, 6}, {s + s/2, 4}},
			append(ok, Result{Key: 0, Route: "within 2 km", Err: "503 Service Unavailable"}), "1 requests failed: within 2 km: 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(Key{ID: 7}, limits, tc.adm, tc.results, 0)
			got := strings.Join(v.Problems, "\n")
			if tc.problem == "" {
				if !v.OK || got != "" {
					t.Fatalf("OK %v, problems %q; want a pass", v.OK, got)
				}
				return
			}
			if v.OK || !strings.Contains(got, tc.problem) {
				t.Fatalf("OK %v, problems %q; want a failure saying %q", v.OK, got, tc.problem)
			}
		})
	}
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loadtest-bin-")
	if err != nil {
		panic(err)
	}
	binary.dir = dir
	code := testenv.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// tileapiBinary builds tileapi once per test binary.
func tileapiBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.path, binary.err = Build(context.Background(), binary.dir)
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func startFleet(t *testing.T, c FleetConfig) *Fleet {
	t.Helper()
	c.Bin, c.Dir, c.Logs = tileapiBinary(t), t.TempDir(), testWriter{t}
	// Keys of their own in the Redis tests share: key:1 of another run (or
	// package) is never this fleet's.
	c.RedisPrefix = fmt.Sprintf("loadtest:%d:%s:", time.Now().UnixNano(), strings.NewReplacer("{", "(", "}", ")").Replace(t.Name()))
	f, err := StartFleet(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// A small run of the exactness scenario: two servers sharing a Redis, two
// keys with a plan of two short limits, four clients per key for two
// seconds: demand far over the limits, and every window exact.
func TestExactnessScenario(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	plan := Plan{Name: "loadtest", MaxRadius: 10_000, Limits: []Limit{
		{Name: "burst", Window: 500 * time.Millisecond, Max: 30},
		{Name: "long", Window: 2 * time.Second, Max: 80},
	}}
	// A budget far above the machine's stalls: these tests check what is
	// served and charged, and a charge refused late (fail closed under a
	// parallel go test) is no finding of theirs.
	f := startFleet(t, FleetConfig{RedisURL: redisURL, Instances: 2, Plan: plan, Keys: 2, QuotaTimeout: "2s"})
	rep, err := Exactness(context.Background(), ExactnessConfig{
		Targets: f.URLs(), AdminTargets: f.AdminURLs(), Keys: f.Keys, AdminToken: f.AdminToken, Redis: quotatest.NewClient(t, redisURL), Prefix: f.QuotaPrefix,
		ClientsPerKey: 4, Duration: 2 * time.Second, MaxRequests: 20_000, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		for _, k := range rep.Keys {
			t.Errorf("key %d: %s", k.Key.ID, strings.Join(k.Problems, "; "))
		}
	}
	for _, k := range rep.Keys {
		t.Logf("key %d: %d requests, %d admitted (%d units), %d denied; peaks %d/%d and %d/%d",
			k.Key.ID, k.Requests, k.Admitted, k.AdmittedCost, k.Denied, k.Limits[0].Peak, plan.Limits[0].Max, k.Limits[1].Peak, plan.Limits[1].Max)
		// The run must have pushed every key against a limit, or it proves
		// nothing.
		if k.Denied == 0 || k.Admitted == 0 || k.LogEntries != k.Admitted {
			t.Errorf("key %d: %d admitted, %d denied, %d logged: the load did not meet the limits", k.Key.ID, k.Admitted, k.Denied, k.LogEntries)
		}
	}
	if len(rep.Keys) != 2 || rep.Keys[0].Key.ID == rep.Keys[1].Key.ID {
		t.Errorf("keys %+v: want two distinct ids", rep.Keys)
	}
	var buf strings.Builder
	if err := WriteExactnessTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "PASS") {
		t.Errorf("table:\n%s", buf.String())
	}
	if err := PlotKey(t.TempDir()+"/key.png", rep, 0); err != nil {
		t.Fatal(err)
	}
}

// A small run of the throughput scenario: the quota in process against the
// quota in Redis, each route for a moment.
func TestThroughputScenario(t *testing.T) {
	plan := Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []Limit{{Name: "second", Window: time.Second, Max: 1 << 40}}}
	redisURL := testenv.RedisURL(t)
	mem := startFleet(t, FleetConfig{Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s"})
	red := startFleet(t, FleetConfig{RedisURL: redisURL, Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s"})
	redisPid, err := RedisPid(context.Background(), quotatest.NewClient(t, redisURL))
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{ServerCPU("in process"): mem.Instances[0].Pid(), ServerCPU("redis"): red.Instances[0].Pid(),
		CPURedis: redisPid, CPULoadTool: os.Getpid()}
	rep, err := Throughput(context.Background(), ThroughputConfig{
		Setups: []Setup{
			{Name: "in process", URL: mem.URLs()[0], Secret: mem.Keys[0].Secret},
			{Name: "redis", URL: red.URLs()[0], Secret: red.Keys[0].Secret},
		},
		Clients: 2, Phase: 300 * time.Millisecond, MaxRequests: 5000, Seed: 1,
		CPU: func(ctx context.Context) (map[string]time.Duration, error) { return ProcessesCPU(ctx, nil, pids) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stats) != 8 || len(rep.Overhead) != 4 {
		t.Fatalf("%d route stats and %d overheads, want 8 and 4", len(rep.Stats), len(rep.Overhead))
	}
	// CPU time a request, summed over a setup's routes: each server and the
	// load tool worked in every setup's phases, and Redis in the Redis
	// setup's (its work in the other's is whatever else uses it).
	cpu := map[string]map[string]time.Duration{}
	for _, st := range rep.Stats {
		if st.Errors > 0 || len(st.Latencies) == 0 || st.P50 <= 0 || st.P50 > st.P99 || st.P99 > st.Max {
			t.Errorf("%s %s: %d requests, %d errors, %d measured, p50 %v p99 %v max %v",
				st.Setup, st.Route, st.Requests, st.Errors, len(st.Latencies), st.P50, st.P99, st.Max)
		}
		if cpu[st.Setup] == nil {
			cpu[st.Setup] = map[string]time.Duration{}
		}
		for p, d := range st.CPU {
			cpu[st.Setup][p] += d
		}
	}
	for _, setup := range []string{"in process", "redis"} {
		c := cpu[setup]
		if c[CPUServer] <= 0 || c[CPULoadTool] <= 0 || setup == "redis" && c[CPURedis] <= 0 {
			t.Errorf("%s: CPU time a request, summed over the routes: server %v, Redis %v, load tool %v; want each above 0",
				setup, c[CPUServer], c[CPURedis], c[CPULoadTool])
		}
	}
	var buf strings.Builder
	if err := WriteThroughputTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteCPUMarkdown(&buf, []*ThroughputReport{rep}, "in process"); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	if err := PlotLatency(t.TempDir()+"/latency.png", rep); err != nil {
		t.Fatal(err)
	}
}

// testWriter logs the servers' output through t.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// A small run of the throughput scenario with a compiled-in plan, on a
// Redis of the test's own so that its counters are the run's alone: the
// plan's in-flight limit shows in what Redis did, beside the tool's plan
// without one. Each request of the pro plan must take its slot and give it
// back (a ZREM a request), and no request of the tool's plan may.
func TestThroughputCompiledPlan(t *testing.T) {
	redisURL := quotatest.StartRedisServer(t).URL()
	rdb := quotatest.NewClient(t, redisURL)
	tool := Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []Limit{{Name: "second", Window: time.Second, Max: 1 << 40}}}
	plain := startFleet(t, FleetConfig{RedisURL: redisURL, Instances: 1, Plan: tool, Keys: 1, QuotaTimeout: "2s"})
	pro := startFleet(t, FleetConfig{RedisURL: redisURL, Instances: 1, Plan: Plan{Name: "pro"}, Keys: 8, QuotaTimeout: "2s"})
	var secrets []string
	for _, k := range pro.Keys {
		secrets = append(secrets, k.Secret)
	}
	rep, err := Throughput(context.Background(), ThroughputConfig{
		Setups: []Setup{
			{Name: "tool's plan", URL: plain.URLs()[0], Secret: plain.Keys[0].Secret, Redis: rdb},
			{Name: "pro", URL: pro.URLs()[0], Secret: secrets[0], Secrets: secrets, Redis: rdb, Metrics: pro.URLs()[0] + "/metrics"},
		},
		Clients: 2, Phase: 300 * time.Millisecond, MaxRequests: 2000, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if err := WriteQuotaMarkdown(&buf, []*ThroughputReport{rep}); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	if len(rep.Stats) != 8 {
		t.Fatalf("%d route stats, want 8", len(rep.Stats))
	}
	for _, st := range rep.Stats {
		u := st.Redis
		if st.Requests == 0 || st.Errors > 0 || st.Denied+st.Budget+st.Unmetered > 0 || u == nil {
			t.Fatalf("%s %s: %d requests, %d errors, %d denied, %d budget, %d unmetered, Redis %+v",
				st.Setup, st.Route, st.Requests, st.Errors, st.Denied, st.Budget, st.Unmetered, u)
		}
		// The late retries are read where the server's metrics are given,
		// and none come with a budget of 2 s.
		if want := map[bool]int{true: 0, false: -1}[st.Setup == "pro"]; st.LateRetries != want {
			t.Errorf("%s %s: %d late retries, want %d", st.Setup, st.Route, st.LateRetries, want)
		}
		// Every request is charged by a script, in a read of Redis's.
		if u.Reads <= 0 || u.Commands["fcall"] < 0.9 || u.Total < u.Commands["fcall"] {
			t.Errorf("%s %s: %.2f reads, %.2f fcall, %.2f commands a request: want each request charged by a function of the library",
				st.Setup, st.Route, u.Reads, u.Commands["fcall"], u.Total)
		}
		switch zrem := u.Commands["zrem"]; {
		case st.Setup == "pro" && zrem < 0.9:
			t.Errorf("pro %s: %.2f ZREM a request: the in-flight slot is not released a request", st.Route, zrem)
		case st.Setup != "pro" && zrem > 0.01:
			t.Errorf("%s %s: %.2f ZREM a request, with no in-flight limit", st.Setup, st.Route, zrem)
		}
	}
	if !strings.Contains(buf.String(), "zrem") {
		t.Errorf("the table names no zrem:\n%s", buf.String())
	}
}
