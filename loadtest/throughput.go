package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"
)

// Setup is one server the throughput scenario measures, and the key it
// sends (on a plan that never denies).
type Setup struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Secret string `json:"-"`
}

// ThroughputConfig is a run of the throughput scenario.
type ThroughputConfig struct {
	// Setups are measured one after the other; the first is the baseline
	// the others are compared with.
	Setups []Setup
	// Clients send requests of one route at a time, for Phase or until
	// MaxRequests have been sent, route after route.
	Clients     int
	Phase       time.Duration
	MaxRequests int
	Seed        uint64
	Progress    io.Writer
}

// Route names of the throughput scenario.
const (
	RouteWithin   = "within 2 km"
	RouteContains = "contains"
	RouteTileHit  = "tile HIT"
	RouteTileMiss = "tile MISS"
)

// RouteStats is what one setup did on one route.
type RouteStats struct {
	Setup    string        `json:"setup"`
	Route    string        `json:"route"`
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"` // anything but a 200
	Other    int           `json:"other"`  // tiles the cache answered otherwise than the route says
	Elapsed  time.Duration `json:"elapsed_ns"`
	RPS      float64       `json:"rps"`
	P50      time.Duration `json:"p50_ns"`
	P95      time.Duration `json:"p95_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`

	Latencies []time.Duration `json:"-"` // sorted, for the plot
}

// Overhead compares a setup with the baseline on one route.
type Overhead struct {
	Setup string `json:"setup"`
	Route string `json:"route"`
	// RPS is the baseline's requests per second over this setup's; P50 and
	// P99 are this setup's latency over the baseline's. Above 1 is slower.
	RPS float64 `json:"rps_ratio"`
	P50 float64 `json:"p50_ratio"`
	P99 float64 `json:"p99_ratio"`
}

// ThroughputReport is the outcome of the throughput scenario.
type ThroughputReport struct {
	Clients  int           `json:"clients"`
	Phase    time.Duration `json:"phase_ns"`
	Stats    []RouteStats  `json:"routes"`
	Overhead []Overhead    `json:"overhead"`
}

// Throughput measures requests per second and latency of each route on
// each setup: a 2 km search, a containment query, tiles the cache holds
// (a few, warmed first) and tiles it does not (each one new: random places
// tiles at z12).
func Throughput(ctx context.Context, c ThroughputConfig) (*ThroughputReport, error) {
	if len(c.Setups) == 0 || c.Clients < 1 || c.Phase <= 0 || c.MaxRequests < 1 {
		return nil, errors.New("loadtest: throughput needs setups, clients, a phase duration and a request bound")
	}
	for _, s := range c.Setups {
		if err := CheckLoopback(s.URL); err != nil {
			return nil, err
		}
	}
	hc := newHTTPClient(c.Clients)
	// Every run draws new miss tiles, so a tile cached in Redis by an
	// earlier run is not taken for a miss.
	missSeed := uint64(time.Now().UnixNano())
	hits := hitTiles(rand.New(rand.NewPCG(missSeed, 0)))
	routes := []struct {
		name  string
		cache string // the X-Tile-Cache a result must carry to count
		next  func(r *rand.Rand) request
	}{
		{RouteWithin, "", func(r *rand.Rand) request {
			p := jitter(r, cities[r.IntN(len(cities))])
			return request{RouteWithin, fmt.Sprintf("/v1/geofence/within?lng=%.5f&lat=%.5f&radius=2000&limit=50", p[0], p[1])}
		}},
		{RouteContains, "", func(r *rand.Rand) request {
			p := jitter(r, cities[r.IntN(len(cities))])
			return request{RouteContains, fmt.Sprintf("/v1/geofence/contains?lng=%.5f&lat=%.5f", p[0], p[1])}
		}},
		{RouteTileHit, "HIT", func(r *rand.Rand) request { return hits[r.IntN(len(hits))] }},
		{RouteTileMiss, "MISS", nil},
	}
	rep := &ThroughputReport{Clients: c.Clients, Phase: c.Phase}
	for _, s := range c.Setups {
		for _, h := range hits { // warm the cache
			if res := do(ctx, hc, s.URL, s.Secret, h); res.Status != http.StatusOK {
				return nil, fmt.Errorf("loadtest: %s: warming %s: %d %s", s.Name, h.path, res.Status, res.Err)
			}
		}
	}
	// Route by route, each setup in turn: the setups compared on a route
	// are measured minutes apart at most, whatever else the machine does.
	for _, rt := range routes {
		next := rt.next
		if next == nil {
			next = missTile
		}
		for si, s := range c.Setups {
			start := time.Now()
			results := drive(ctx, c.Clients, c.Phase, c.MaxRequests, c.Seed^missSeed^uint64(si), c.Progress, s.Name+" "+rt.name,
				func(ctx context.Context, _ int, r *rand.Rand) Result { return do(ctx, hc, s.URL, s.Secret, next(r)) })
			rep.Stats = append(rep.Stats, routeStats(s.Name, rt.name, rt.cache, results, time.Since(start)))
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	for _, b := range rep.Stats {
		if b.Setup != c.Setups[0].Name {
			continue
		}
		for _, st := range rep.Stats {
			if st.Setup != b.Setup && st.Route == b.Route && st.RPS > 0 && b.P50 > 0 && b.P99 > 0 {
				rep.Overhead = append(rep.Overhead, Overhead{Setup: st.Setup, Route: st.Route,
					RPS: b.RPS / st.RPS, P50: float64(st.P50) / float64(b.P50), P99: float64(st.P99) / float64(b.P99)})
			}
		}
	}
	return rep, nil
}

func routeStats(setup, route, cache string, results []Result, elapsed time.Duration) RouteStats {
	st := RouteStats{Setup: setup, Route: route, Requests: len(results), Elapsed: elapsed}
	for _, r := range results {
		switch {
		case r.Status != http.StatusOK:
			st.Errors++
		case r.Cache != cache:
			st.Other++
		default:
			st.Latencies = append(st.Latencies, r.Latency)
		}
	}
	slices.Sort(st.Latencies)
	st.RPS = float64(len(results)) / elapsed.Seconds()
	st.P50, st.P95, st.P99 = quantile(st.Latencies, 0.50), quantile(st.Latencies, 0.95), quantile(st.Latencies, 0.99)
	if n := len(st.Latencies); n > 0 {
		st.Max = st.Latencies[n-1]
	}
	return st
}

// quantile returns the q-quantile of sorted by the nearest-rank method.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// jitter moves p by up to about a kilometre.
func jitter(r *rand.Rand, p [2]float64) [2]float64 {
	return [2]float64{p[0] + (r.Float64()-0.5)*0.02, p[1] + (r.Float64()-0.5)*0.02}
}

// hitTiles draws the 64 tiles the hit phase repeats, from the tiles the
// miss phase draws, so that the two differ by the cache alone.
func hitTiles(r *rand.Rand) []request {
	out := make([]request, 64)
	for i := range out {
		out[i] = missTile(r)
		out[i].route = RouteTileHit
	}
	return out
}

// missTile draws a places tile at z12 over Europe (about 200,000 tiles).
func missTile(r *rand.Rand) request {
	x0, y0 := tileOf([2]float64{-10, 60}, 12)
	x1, y1 := tileOf([2]float64{30, 36}, 12)
	return request{RouteTileMiss, fmt.Sprintf("/v1/tiles/places/12/%d/%d.mvt", x0+r.IntN(x1-x0), y0+r.IntN(y1-y0))}
}
