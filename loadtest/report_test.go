package loadtest

import (
	"math"
	"testing"
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
