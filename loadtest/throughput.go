package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paulmach/orb/maptile"
)

// Setup is one server the throughput scenario measures, and the key it
// sends (on a plan that never denies, or on a plan customers buy).
type Setup struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Secret string `json:"-"`
	// Secrets, if set, are the keys requests are sent with instead of
	// Secret, drawn at random for each: a load spread over many keys on a
	// plan customers buy, each within its limits.
	Secrets []string `json:"-"`
	// Redis, if set, is a client of the Redis the setup's server uses:
	// each phase then reports what its requests made Redis do
	// (RouteStats.Redis).
	Redis RedisInfo `json:"-"`
	// Metrics, if set, is the URL of the Prometheus metrics of the setup's
	// server (/metrics): each phase then reports the
	// charges it tried again for coming late (RouteStats.LateRetries).
	Metrics string `json:"-"`
	// TilePath, if set, makes this a tile server other than tileapi
	// (pg_tileserv): only tile misses are measured on it, at this path with
	// {z}, {x} and {y} replaced, and it is not expected to say X-Tile-Cache.
	TilePath string `json:"tile_path,omitempty"`
	// Layer is the tileapi layer its tile routes ask for; empty: places.
	Layer string `json:"layer,omitempty"`
}

// key returns the key of request i of s: Secret, or one of Secrets in
// turn.
func (s Setup) key(i int) string {
	if len(s.Secrets) > 0 {
		return s.Secrets[i%len(s.Secrets)]
	}
	return s.Secret
}

// foreign says whether s is a tile server other than tileapi.
func (s Setup) foreign() bool { return s.TilePath != "" }

// tilePath is the path of places tile t on s.
func (s Setup) tilePath(t maptile.Tile) string { return s.layerPath(s.Layer, t) }

// layerPath is the path of tile t of tileapi's layer on s (places if
// empty); on another tile server, of its own places layer.
func (s Setup) layerPath(layer string, t maptile.Tile) string {
	if s.foreign() {
		return strings.NewReplacer("{z}", strconv.Itoa(int(t.Z)), "{x}", strconv.Itoa(int(t.X)), "{y}", strconv.Itoa(int(t.Y))).Replace(s.TilePath)
	}
	if layer == "" {
		layer = "places"
	}
	return fmt.Sprintf("/v1/tiles/%s/%d/%d/%d.mvt", layer, t.Z, t.X, t.Y)
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
	// Tiles are the places tiles the tile routes draw from, in the order
	// they are drawn: the first 64 are the hits, and each setup's misses walk
	// the rest from the start, never twice in a phase. Empty: random tiles
	// of zoom 12 over Europe.
	Tiles []maptile.Tile
	// TableLayer, if set, is a layer of the tileapi setups that draws the
	// same places as the places layer (WriteTableLayer): the run adds the
	// route RouteTableMiss, whose misses walk the same tiles from the
	// other end, on that layer in tileapi and on its places layer in
	// another tile server.
	TableLayer string
	Seed       uint64
	Progress   io.Writer
	// CPU, if set, returns the CPU time used so far by each process on a
	// request's path: each setup's server under ServerCPU(its name), and
	// CPUPostgres, CPURedis and CPULoadTool (ProcessesCPU): each phase
	// then reports the CPU time a request took in each (RouteStats.CPU).
	CPU func(context.Context) (map[string]time.Duration, error)
}

// ServerCPU is the name of setup's server in ThroughputConfig.CPU's
// times: apart from the shared processes' (a setup may be named "redis").
func ServerCPU(setup string) string { return "server " + setup }

// Route names of the throughput scenario.
const (
	RouteWithin   = "within 2 km"
	RouteContains = "contains"
	RouteTileHit  = "tile HIT"
	RouteTileMiss = "tile MISS"
	// RouteTableMiss is RouteTileMiss on ThroughputConfig.TableLayer.
	RouteTableMiss = "table layer MISS"
)

// RouteStats is what one setup did on one route.
type RouteStats struct {
	Setup    string `json:"setup"`
	Route    string `json:"route"`
	Requests int    `json:"requests"`
	Errors   int    `json:"errors"` // anything but a 200
	Other    int    `json:"other"`  // tiles the cache answered otherwise than the route says
	// Denied counts 429s: a limit or the in-flight limit of the key's plan.
	Denied int `json:"denied"`
	// Unmetered counts the 200s served unmetered (X-Quota-Status
	// unmetered or unmetered-pending: a server failing open), Budget the
	// 503s quota-unavailable (failing closed): the quota call missed its
	// time budget (TILEAPI_QUOTA_TIMEOUT) or Redis failed.
	Unmetered int `json:"unmetered"`
	Budget    int `json:"budget"`
	// LateRetries counts the charges the server tried again because Redis
	// received them too late in their budget to make them (a saturated
	// machine), for a setup with Setup.Metrics; -1 unknown.
	LateRetries int `json:"late_retries"`
	// Redis is what the requests made Redis do, for a setup with
	// Setup.Redis.
	Redis *RedisUse `json:"redis,omitempty"`
	// CPU is the CPU time a request took in each process on its path
	// during the phase, with ThroughputConfig.CPU: the setup's server
	// (CPUServer), PostgreSQL's backends, Redis and the load tool. Unlike
	// req/s it does not move with what else the machine runs.
	CPU     map[string]time.Duration `json:"cpu_ns,omitempty"`
	Elapsed time.Duration            `json:"elapsed_ns"`
	RPS     float64                  `json:"rps"`
	P50     time.Duration            `json:"p50_ns"`
	P95     time.Duration            `json:"p95_ns"`
	P99     time.Duration            `json:"p99_ns"`
	Max     time.Duration            `json:"max_ns"`
	// Bytes is the mean size of the timed responses' bodies, uncompressed.
	Bytes float64 `json:"bytes"`

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

// Ratio is how many requests per second a tileapi setup served on a route
// for each one another setup served: the baseline, or a tile server other
// than tileapi. Above 1 is faster.
type Ratio struct {
	Route  string  `json:"route"`
	Setup  string  `json:"setup"`
	Versus string  `json:"versus"`
	RPS    float64 `json:"rps"`
}

// ThroughputReport is the outcome of the throughput scenario.
type ThroughputReport struct {
	Clients int           `json:"clients"`
	Phase   time.Duration `json:"phase_ns"`
	Stats   []RouteStats  `json:"routes"`
	// Overhead compares each tileapi setup with the baseline; Ratios also
	// compares each with any other tile server.
	Overhead []Overhead `json:"overhead"`
	Ratios   []Ratio    `json:"ratios"`
}

// Throughput measures requests per second and latency of each route on
// each setup: a 2 km search, a containment query, tiles the cache holds
// (a few, warmed first) and tiles it does not (each one new). A tile server
// other than tileapi is measured on tile misses only, all of them new to
// it. With a table layer, tileapi's misses are measured on it too.
func Throughput(ctx context.Context, c ThroughputConfig) (*ThroughputReport, error) {
	if len(c.Setups) == 0 || c.Setups[0].foreign() || c.Clients < 1 || c.Phase <= 0 || c.MaxRequests < 1 {
		return nil, errors.New("loadtest: throughput needs setups (the first one tileapi), clients, a phase duration and a request bound")
	}
	if len(c.Tiles) != 0 && len(c.Tiles) <= HitTiles {
		return nil, fmt.Errorf("loadtest: throughput needs more than %d tiles, got %d", HitTiles, len(c.Tiles))
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
	hits, misses := c.Tiles[:min(HitTiles, len(c.Tiles))], c.Tiles[min(HitTiles, len(c.Tiles)):]
	if len(c.Tiles) == 0 {
		hits = randomTiles(rand.New(rand.NewPCG(missSeed, 0)), HitTiles)
	}
	search := func(format string) func(Setup) (func(*rand.Rand) string, int) {
		return func(Setup) (func(*rand.Rand) string, int) {
			return func(r *rand.Rand) string {
				p := jitter(r, cities[r.IntN(len(cities))])
				return fmt.Sprintf(format, p[0], p[1])
			}, c.MaxRequests
		}
	}
	// miss returns the phase of a miss route on layer: each tile drawn
	// once, from the start of misses or, backwards, from its end.
	miss := func(layer string, backwards bool) func(Setup) (func(*rand.Rand) string, int) {
		return func(s Setup) (func(*rand.Rand) string, int) {
			if len(misses) == 0 {
				return func(r *rand.Rand) string { return s.layerPath(layer, randomTile(r)) }, c.MaxRequests
			}
			var drawn atomic.Int64 // drive calls next at most most times
			return func(*rand.Rand) string {
				i := int(drawn.Add(1) - 1)
				if backwards {
					i = len(misses) - 1 - i
				}
				return s.layerPath(layer, misses[i])
			}, min(c.MaxRequests, len(misses))
		}
	}
	type route struct {
		name  string
		cache string // the X-Tile-Cache a result of tileapi must carry to count
		// foreign says that other tile servers are measured on it too.
		foreign bool
		// phase returns the paths one setup's phase on this route asks
		// for, and how many it can ask for at most.
		phase func(s Setup) (next func(r *rand.Rand) string, most int)
	}
	routes := []route{
		{RouteWithin, "", false, search("/v1/geofence/within?lng=%.5f&lat=%.5f&radius=2000&limit=50")},
		{RouteContains, "", false, search("/v1/geofence/contains?lng=%.5f&lat=%.5f")},
		{RouteTileHit, "HIT", false, func(s Setup) (func(*rand.Rand) string, int) {
			return func(r *rand.Rand) string { return s.tilePath(hits[r.IntN(len(hits))]) }, c.MaxRequests
		}},
		{RouteTileMiss, "MISS", true, func(s Setup) (func(*rand.Rand) string, int) { return miss(s.Layer, false)(s) }},
	}
	if c.TableLayer != "" {
		// From the other end: a tile server without a cache (pg_tileserv)
		// sees no tile twice unless a phase draws half the list.
		routes = append(routes, route{RouteTableMiss, "MISS", true, miss(c.TableLayer, true)})
	}
	rep := &ThroughputReport{Clients: c.Clients, Phase: c.Phase}
	for _, s := range c.Setups {
		if s.foreign() {
			continue
		}
		for i, h := range hits { // warm the cache
			// A 503 (a quota call over its budget on a busy machine) says
			// retry: warming only has to get each tile cached once. So does
			// a 429 on a plan of its own (-plan) whose keys the phase before
			// spent: the burst window empties within seconds.
			res := do(ctx, hc, s.URL, s.key(i), request{RouteTileHit, s.tilePath(h)})
			for try := 0; (res.Status == http.StatusServiceUnavailable && try < busyTries) ||
				(res.Status == http.StatusTooManyRequests && try < spentTries); try++ {
				time.Sleep(busyPause)
				res = do(ctx, hc, s.URL, s.key(i), request{RouteTileHit, s.tilePath(h)})
			}
			if res.Status != http.StatusOK {
				return nil, fmt.Errorf("loadtest: %s: warming %s: %d %s", s.Name, s.tilePath(h), res.Status, res.Err)
			}
		}
	}
	// Route by route, each setup in turn: the setups compared on a route
	// are measured minutes apart at most, whatever else the machine does.
	for _, rt := range routes {
		for si, s := range c.Setups {
			cache := rt.cache
			if s.foreign() {
				if !rt.foreign {
					continue
				}
				cache = ""
			}
			next, most := rt.phase(s)
			var before redisCounters
			if s.Redis != nil {
				var err error
				if before, err = readRedisCounters(ctx, s.Redis); err != nil {
					return nil, err
				}
			}
			var lateBefore int64
			if s.Metrics != "" {
				var err error
				if lateBefore, err = readCounter(ctx, hc, s.Metrics, lateRetriesMetric); err != nil {
					return nil, err
				}
			}
			var cpu0 map[string]time.Duration
			if c.CPU != nil {
				var err error
				if cpu0, err = c.CPU(ctx); err != nil {
					return nil, err
				}
			}
			start := time.Now()
			results := drive(ctx, c.Clients, c.Phase, most, c.Seed^missSeed^uint64(si), c.Progress, s.Name+" "+rt.name,
				func(ctx context.Context, _ int, r *rand.Rand) Result {
					return do(ctx, hc, s.URL, s.key(r.Int()), request{rt.name, next(r)})
				})
			st := routeStats(s.Name, rt.name, cache, results, time.Since(start))
			if c.CPU != nil && len(results) > 0 {
				cpu1, err := c.CPU(ctx)
				if err != nil {
					return nil, err
				}
				n := time.Duration(len(results))
				st.CPU = map[string]time.Duration{CPUServer: (cpu1[ServerCPU(s.Name)] - cpu0[ServerCPU(s.Name)]) / n}
				for _, p := range []string{CPUPostgres, CPURedis, CPULoadTool} {
					st.CPU[p] = (cpu1[p] - cpu0[p]) / n
				}
			}
			if s.Redis != nil {
				after, err := readRedisCounters(ctx, s.Redis)
				if err != nil {
					return nil, err
				}
				st.Redis = after.use(before, len(results))
			}
			st.LateRetries = -1
			if s.Metrics != "" && lateBefore >= 0 {
				after, err := readCounter(ctx, hc, s.Metrics, lateRetriesMetric)
				if err != nil {
					return nil, err
				}
				st.LateRetries = int(after - lateBefore)
			}
			rep.Stats = append(rep.Stats, st)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	rep.compare(c.Setups)
	return rep, nil
}

// busyTries is how often a request outside the measured phases (warming
// the cache, checking tiles) is asked again after a 503, busyPause apart:
// on a busy machine a quota call can miss its time budget for a while.
const (
	busyTries = 20
	busyPause = 100 * time.Millisecond
	// spentTries is how often warming asks again after a 429, busyPause
	// apart: longer than the compiled-in plans' burst window of 5 s.
	spentTries = 70
)

// HitTiles is how many tiles the hit phase repeats: the first of
// ThroughputConfig.Tiles, when given.
const HitTiles = 64

// compare fills r.Overhead and r.Ratios: each tileapi setup against the
// baseline (setups[0]) and against every other tile server.
func (r *ThroughputReport) compare(setups []Setup) {
	stats := map[[2]string]RouteStats{}
	for _, st := range r.Stats {
		stats[[2]string{st.Setup, st.Route}] = st
	}
	for _, route := range []string{RouteWithin, RouteContains, RouteTileHit, RouteTileMiss, RouteTableMiss} {
		b, ok := stats[[2]string{setups[0].Name, route}]
		if !ok {
			continue
		}
		for _, s := range setups[1:] {
			st, ok := stats[[2]string{s.Name, route}]
			if !ok || s.foreign() || st.RPS <= 0 || b.RPS <= 0 {
				continue
			}
			r.Ratios = append(r.Ratios, Ratio{Route: route, Setup: s.Name, Versus: b.Setup, RPS: st.RPS / b.RPS})
			if b.P50 > 0 && b.P99 > 0 {
				r.Overhead = append(r.Overhead, Overhead{Setup: s.Name, Route: route,
					RPS: b.RPS / st.RPS, P50: float64(st.P50) / float64(b.P50), P99: float64(st.P99) / float64(b.P99)})
			}
		}
		for _, f := range setups {
			fs, ok := stats[[2]string{f.Name, route}]
			if !f.foreign() || !ok || fs.RPS <= 0 {
				continue
			}
			for _, s := range setups {
				if st, ok := stats[[2]string{s.Name, route}]; ok && !s.foreign() {
					r.Ratios = append(r.Ratios, Ratio{Route: route, Setup: s.Name, Versus: f.Name, RPS: st.RPS / fs.RPS})
				}
			}
		}
	}
}

func routeStats(setup, route, cache string, results []Result, elapsed time.Duration) RouteStats {
	st := RouteStats{Setup: setup, Route: route, Requests: len(results), Elapsed: elapsed}
	for _, r := range results {
		switch {
		case r.Status == http.StatusTooManyRequests:
			st.Denied++
		case r.Status == http.StatusServiceUnavailable && r.Code == codeUnavailable:
			st.Budget++
		case r.Status == http.StatusOK && (r.Quota == "unmetered" || r.Quota == "unmetered-pending"):
			st.Unmetered++
		}
		switch {
		case r.Status != http.StatusOK:
			st.Errors++
		case r.Cache != cache:
			st.Other++
		default:
			st.Latencies = append(st.Latencies, r.Latency)
			st.Bytes += float64(r.Bytes)
		}
	}
	slices.Sort(st.Latencies)
	st.RPS = float64(len(results)) / elapsed.Seconds()
	st.P50, st.P95, st.P99 = quantile(st.Latencies, 0.50), quantile(st.Latencies, 0.95), quantile(st.Latencies, 0.99)
	if n := len(st.Latencies); n > 0 {
		st.Max = st.Latencies[n-1]
		st.Bytes /= float64(n)
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

// randomTiles draws n tiles as the miss phase does, for the hit phase to
// repeat, so that the two differ by the cache alone.
func randomTiles(r *rand.Rand, n int) []maptile.Tile {
	out := make([]maptile.Tile, n)
	for i := range out {
		out[i] = randomTile(r)
	}
	return out
}

// randomTile draws a places tile at z12 over Europe (about 200,000 tiles).
func randomTile(r *rand.Rand) maptile.Tile {
	x0, y0 := tileOf([2]float64{-10, 60}, 12)
	x1, y1 := tileOf([2]float64{30, 36}, 12)
	return maptile.New(uint32(x0+r.IntN(x1-x0)), uint32(y0+r.IntN(y1-y0)), 12)
}
