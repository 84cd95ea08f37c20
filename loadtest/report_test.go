package loadtest

import (
	"math"
	"strings"
	"testing"
	"time"
)

// RatioSummary takes a ratio the right way round whichever setup was the
// baseline of its step.
func TestRatioSummary(t *testing.T) {
	reps := []*ThroughputReport{
		{Ratios: []Ratio{{Route: "a", Setup: "on", Versus: "off", RPS: 0.5}, {Route: "a", Setup: "other", Versus: "off", RPS: 9}}},
		{Ratios: []Ratio{{Route: "a", Setup: "off", Versus: "on", RPS: 0.5}}}, // on was 2x off
	}
	mean, lo, hi, n := RatioSummary(reps, "on", "off")
	if n != 2 || math.Abs(mean-1) > 1e-9 || lo != 0.5 || hi != 2 {
		t.Errorf("mean %v, lo %v, hi %v of %d ratios; want 1, 0.5, 2 of 2", mean, lo, hi, n)
	}
}

// allRoutes weighs each route's Redis counts by its requests, and gives
// the req/s of all the requests over all the time.
func TestAllRoutes(t *testing.T) {
	r := &ThroughputReport{Stats: []RouteStats{
		{Setup: "redis", Route: "a", Requests: 100, Elapsed: time.Second, Budget: 1, Redis: &RedisUse{Commands: map[string]float64{"evalsha": 1}, Total: 1, Reads: 1}},
		{Setup: "redis", Route: "b", Requests: 300, Elapsed: time.Second, Denied: 3, Redis: &RedisUse{Commands: map[string]float64{"evalsha": 3, "zrem": 1}, Total: 4, Reads: 2}},
		{Setup: "in process", Route: "a", Requests: 50, Elapsed: time.Second},
	}}
	all := r.allRoutes()
	if len(all) != 2 || all[1].Setup != "in process" || all[1].Redis != nil || all[1].RPS != 50 {
		t.Fatalf("%+v", all)
	}
	got := all[0]
	if got.Requests != 400 || got.RPS != 200 || got.Budget != 1 || got.Denied != 3 || got.Redis.Reads != 1.75 ||
		got.Redis.Total != 3.25 || got.Redis.Commands["evalsha"] != 2.5 || got.Redis.Commands["zrem"] != 0.75 {
		t.Errorf("%+v, Redis %+v", got, got.Redis)
	}
}

// WriteCPUMarkdown averages a setup's CPU times over the steps of a client
// count, adds the processes up, and gives the versus setup's total over
// each other's on the same route; a setup measured without CPU times adds
// no row.
func TestWriteCPUMarkdown(t *testing.T) {
	ms := time.Millisecond
	cpu := func(server, pg, redis, tool time.Duration) map[string]time.Duration {
		return map[string]time.Duration{CPUServer: server, CPUPostgres: pg, CPURedis: redis, CPULoadTool: tool}
	}
	reps := []*ThroughputReport{
		{Clients: 8, Stats: []RouteStats{
			{Setup: "in process", Route: "hit", CPU: cpu(ms/10, 0, 0, ms/10)},
			{Setup: "redis", Route: "hit", CPU: cpu(ms/5, 0, ms/10, ms/10)},
			{Setup: "pg_tileserv", Route: "miss"}, // no CPU times
		}},
		{Clients: 8, Stats: []RouteStats{
			{Setup: "redis", Route: "hit", CPU: cpu(3*ms/10, 0, ms/10, ms/10)},
			{Setup: "in process", Route: "hit", CPU: cpu(3*ms/10, 0, 0, ms/10)},
		}},
	}
	var b strings.Builder
	if err := WriteCPUMarkdown(&b, reps, "in process"); err != nil {
		t.Fatal(err)
	}
	// in process: 0.2 + 0.1 = 0.3 ms; redis: 0.25 + 0.1 + 0.1 = 0.45 ms.
	for _, want := range []string{
		"| 8 | hit | in process | 0.200 | 0.000 | 0.000 | 0.100 | 0.300 |  |\n",
		"| 8 | hit | redis | 0.250 | 0.000 | 0.100 | 0.100 | 0.450 | 0.67x |\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no row %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "pg_tileserv") {
		t.Errorf("a row for a setup without CPU times:\n%s", b.String())
	}
	if err := WriteCPUMarkdown(&b, reps[:0], "in process"); err == nil {
		t.Error("no error without CPU times")
	}
}
