package loadtest

import (
	"math"
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
