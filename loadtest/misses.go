package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/tiles"
)

// MissZoom is one zoom of a Misses run: the tiles drawn, in order, and
// the servers measured on them.
type MissZoom struct {
	Zoom   maptile.Zoom
	Tiles  []maptile.Tile
	Setups []Setup
}

// MissesConfig is a run of Misses.
type MissesConfig struct {
	Zooms   []MissZoom
	Clients int
	Phase   time.Duration
	// Rounds of every setup, zoom and encoding; the setups take turns
	// within a round, so that a ratio compares phases run side by side.
	Rounds   int
	Progress io.Writer
	// CPU, if set, returns the CPU time each process on a tile's path
	// (each server, PostgreSQL, Redis, the load tool) has used so far, by
	// name: a phase then records what each used during it, a request. On a
	// machine shared with other work, req/s measures the share each server
	// got as much as the server; CPU time a request does not.
	CPU func(context.Context) (map[string]time.Duration, error)
}

// MissPhase is what one setup did in one phase: one zoom, one encoding,
// one round.
type MissPhase struct {
	Setup    string        `json:"setup"`
	Zoom     int           `json:"zoom"`
	Gzip     bool          `json:"gzip"`
	Round    int           `json:"round"`
	Start    time.Time     `json:"start"` // to line the phase up with other measures (CPU time)
	Elapsed  time.Duration `json:"elapsed_ns"`
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"` // anything but a 200
	Other    int           `json:"other"`  // tileapi answers not marked MISS
	RPS      float64       `json:"rps"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Bytes    float64       `json:"bytes"` // mean body size as sent, gzipped or not
	// CPU is the CPU time each process (MissesConfig.CPU) used during the
	// phase, a request answered.
	CPU map[string]time.Duration `json:"cpu_ns,omitempty"`
}

// Misses measures tile misses on every setup of every zoom, without
// compression and with Accept-Encoding: gzip, round after round, the
// setups taking turns. Each phase walks the zoom's tiles from a new start,
// over and over if the phase outlasts them: tileapi must be started with a
// tile cache that keeps nothing for long (TILEAPI_TILE_CACHE_TTL=1ms), so
// that every tile asked for is rendered, and answers that say otherwise
// are counted apart.
func Misses(ctx context.Context, c MissesConfig) ([]MissPhase, error) {
	if len(c.Zooms) == 0 || c.Clients < 1 || c.Phase <= 0 || c.Rounds < 1 {
		return nil, errors.New("loadtest: misses needs zooms, clients, a phase and rounds")
	}
	for _, z := range c.Zooms {
		for _, s := range z.Setups {
			if c.CPU != nil && slices.Contains([]string{CPUPostgres, CPURedis, CPULoadTool}, s.Name) {
				return nil, fmt.Errorf("loadtest: misses: setup %q has the name of a shared process", s.Name)
			}
		}
	}
	hc := newHTTPClient(c.Clients)
	hc.Transport.(*http.Transport).DisableCompression = true // the body as sent
	var out []MissPhase
	start := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for round := range c.Rounds {
		for _, z := range c.Zooms {
			if len(z.Tiles) == 0 {
				return nil, fmt.Errorf("loadtest: misses: no tiles at zoom %d", z.Zoom)
			}
			for _, gz := range []bool{false, true} {
				setups := slices.Clone(z.Setups)
				if round%2 == 1 { // neither always first
					slices.Reverse(setups)
				}
				for _, s := range setups {
					if err := CheckLoopback(s.URL); err != nil {
						return nil, err
					}
					p, err := missPhase(ctx, hc, c, s, z, gz, round, start.IntN(len(z.Tiles)))
					if err != nil {
						return nil, err
					}
					out = append(out, p)
				}
			}
		}
	}
	return out, nil
}

func missPhase(ctx context.Context, hc *http.Client, c MissesConfig, s Setup, z MissZoom, gz bool, round, first int) (MissPhase, error) {
	var cpu0 map[string]time.Duration
	if c.CPU != nil {
		var err error
		if cpu0, err = c.CPU(ctx); err != nil {
			return MissPhase{}, err
		}
	}
	var drawn atomic.Int64
	label := fmt.Sprintf("%s z%d gzip=%t", s.Name, z.Zoom, gz)
	t0 := time.Now()
	results := drive(ctx, c.Clients, c.Phase, 1<<30, uint64(round), c.Progress, label,
		func(ctx context.Context, _ int, _ *rand.Rand) Result {
			t := z.Tiles[(first+int(drawn.Add(1)))%len(z.Tiles)]
			return fetchMiss(ctx, hc, s, s.tilePath(t), gz)
		})
	elapsed := time.Since(t0)
	p := MissPhase{Setup: s.Name, Zoom: int(z.Zoom), Gzip: gz, Round: round, Start: t0, Elapsed: elapsed}
	var lat []time.Duration
	var bytes int
	for _, r := range results {
		switch {
		case r.Status != http.StatusOK:
			p.Errors++
		case !s.foreign() && r.Cache != "MISS":
			p.Other++
		default:
			lat = append(lat, r.Latency)
			bytes += r.Bytes
		}
	}
	p.Requests = len(lat)
	p.RPS = float64(len(lat)) / elapsed.Seconds()
	if len(lat) > 0 {
		slices.Sort(lat)
		p.P50, p.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
		p.Bytes = float64(bytes) / float64(len(lat))
	}
	if c.CPU != nil && len(lat) > 0 {
		cpu1, err := c.CPU(ctx)
		if err != nil {
			return MissPhase{}, err
		}
		p.CPU = map[string]time.Duration{}
		for name, t := range cpu1 {
			p.CPU[name] = (t - cpu0[name]) / time.Duration(len(results))
		}
	}
	return p, nil
}

// fetchMiss asks s for path, gzip-encoded if gz, and reads the whole body.
func fetchMiss(ctx context.Context, hc *http.Client, s Setup, path string, gz bool) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return Result{Err: err.Error()}
	}
	if s.Secret != "" {
		req.Header.Set("X-API-Key", s.Secret)
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return Result{Err: err.Error()}
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	res := Result{Status: resp.StatusCode, Cache: resp.Header.Get("X-Tile-Cache"), Latency: time.Since(t0), Bytes: int(n)}
	if err != nil {
		res.Status, res.Err = 0, err.Error()
	}
	return res
}

// TileservZoomPath is TileservPath thinned at zoom z as tileapi's places
// layer thins it: the places of at least its MinPopulation(z), at most
// MaxFeatures of them (pg_tileserv's filter and limit), so that both draw
// the same places wherever a tile holds fewer than the cap.
func TileservZoomPath(schema string, z maptile.Zoom) (string, error) {
	return tileservZoomPath(schema, PlacesView, z)
}

// TileservLowZoomPath is TileservZoomPath over places_low, as tileapi reads
// it, at a zoom up to tiles.LowPlacesZoom.
func TileservLowZoomPath(schema string, z maptile.Zoom) (string, error) {
	if z > tiles.LowPlacesZoom {
		return "", fmt.Errorf("loadtest: places_low holds the places of zooms up to %d, not %d", tiles.LowPlacesZoom, z)
	}
	return tileservZoomPath(schema, PlacesLowView, z)
}

func tileservZoomPath(schema, view string, z maptile.Zoom) (string, error) {
	places, err := tiles.LookupLayer("places")
	if err != nil {
		return "", fmt.Errorf("loadtest: %w", err)
	}
	path := tileservPath(schema, view)
	if min := places.MinPopulation(int(z)); min > 0 {
		path += fmt.Sprintf("&limit=%d&filter=%s", places.MaxFeatures, url.QueryEscape(fmt.Sprintf("population >= %d", min)))
	}
	return path, nil
}

// WriteMissesTable writes phases as a Markdown table, a row for each
// zoom, encoding and setup: its mean req/s, p50 and bytes over the rounds,
// and its req/s over that of versus, overall and the lowest and highest of
// any one round.
func WriteMissesTable(w io.Writer, phases []MissPhase, versus string) error {
	type key struct {
		zoom int
		gzip bool
	}
	var keys []key
	var names []string
	by := map[key]map[string][]MissPhase{}
	for _, p := range phases {
		k := key{p.Zoom, p.Gzip}
		if by[k] == nil {
			keys, by[k] = append(keys, k), map[string][]MissPhase{}
		}
		if !slices.Contains(names, p.Setup) {
			names = append(names, p.Setup)
		}
		by[k][p.Setup] = append(by[k][p.Setup], p)
	}
	if !slices.Contains(names, versus) {
		return fmt.Errorf("loadtest: no phase of %s to compare with", versus)
	}
	fmt.Fprintf(w, "| zoom | encoding | setup | req/s | p50 ms | bytes | over %s | rounds: lowest, highest | errors, not MISS |\n", versus)
	fmt.Fprintln(w, "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, k := range keys {
		enc := "identity"
		if k.gzip {
			enc = "gzip"
		}
		ref := by[k][versus]
		for _, name := range names {
			ps := by[k][name]
			if len(ps) == 0 {
				continue // a setup of other zooms only (tilemisses -tileserv-low)
			}
			m := meanPhase(ps)
			ratio, rounds := "", ""
			if name != versus {
				lo, hi := 0.0, 0.0
				for i := range min(len(ps), len(ref)) {
					r := ps[i].RPS / ref[i].RPS
					if i == 0 || r < lo {
						lo = r
					}
					hi = max(hi, r)
				}
				ratio, rounds = fmt.Sprintf("%.2fx", m.RPS/meanPhase(ref).RPS), fmt.Sprintf("%.2fx, %.2fx", lo, hi)
			}
			fmt.Fprintf(w, "| z%d | %s | %s | %s | %s | %.0f | %s | %s | %d, %d |\n",
				k.zoom, enc, name, thousands(m.RPS), ms(m.P50), m.Bytes, ratio, rounds, m.Errors, m.Other)
		}
	}
	return nil
}

// Shared processes of MissesConfig.CPU, beside each setup's server under
// its setup's name.
const (
	CPUPostgres = "postgres"
	CPURedis    = "redis"
	CPULoadTool = "load tool"
	// CPUServer is the measured setup's own server in RouteStats.CPU.
	CPUServer = "server"
)

// WriteMissesCPUTable writes the CPU time a request of phases (measured
// with MissesConfig.CPU) as a Markdown table, a row for each zoom,
// encoding and setup: the mean over the rounds of its own server's,
// PostgreSQL's, Redis's and the load tool's, their total, and how many
// requests it serves for the CPU time versus takes for one: what its req/s
// over versus's would be on a machine that ran nothing else.
func WriteMissesCPUTable(w io.Writer, phases []MissPhase, versus string) error {
	type key struct {
		zoom  int
		gzip  bool
		setup string
	}
	var keys []key
	sums := map[key]map[string]time.Duration{}
	rounds := map[key]int{}
	for _, p := range phases {
		if p.CPU == nil {
			return fmt.Errorf("loadtest: %s z%d: no CPU time measured", p.Setup, p.Zoom)
		}
		k := key{p.Zoom, p.Gzip, p.Setup}
		if sums[k] == nil {
			keys, sums[k] = append(keys, k), map[string]time.Duration{}
		}
		rounds[k]++
		for _, name := range []string{p.Setup, CPUPostgres, CPURedis, CPULoadTool} {
			sums[k][name] += p.CPU[name]
		}
	}
	// total returns the mean milliseconds a request of each process, and
	// their sum.
	total := func(k key) (server, pg, redis, tool, all float64) {
		ms := func(name string) float64 {
			return float64(sums[k][name]) / float64(rounds[k]) / float64(time.Millisecond)
		}
		server, pg, redis, tool = ms(k.setup), ms(CPUPostgres), ms(CPURedis), ms(CPULoadTool)
		return server, pg, redis, tool, server + pg + redis + tool
	}
	fmt.Fprintf(w, "| zoom | encoding | setup | server | PostgreSQL | Redis | load tool | total | %s's total over this |\n", versus)
	fmt.Fprintln(w, "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, k := range keys {
		ref := k
		ref.setup = versus
		if sums[ref] == nil {
			return fmt.Errorf("loadtest: no phase of %s at z%d to compare with", versus, k.zoom)
		}
		enc := "identity"
		if k.gzip {
			enc = "gzip"
		}
		server, pg, redis, tool, all := total(k)
		ratio := ""
		if k.setup != versus {
			_, _, _, _, refAll := total(ref)
			ratio = fmt.Sprintf("%.2fx", refAll/all)
		}
		fmt.Fprintf(w, "| z%d | %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", k.zoom, enc, k.setup, server, pg, redis, tool, all, ratio)
	}
	return nil
}

// meanPhase is the mean of ps's req/s, p50 and bytes, and the sum of their
// errors and other answers.
func meanPhase(ps []MissPhase) MissPhase {
	var m MissPhase
	for _, p := range ps {
		m.RPS += p.RPS / float64(len(ps))
		m.P50 += p.P50 / time.Duration(len(ps))
		m.Bytes += p.Bytes / float64(len(ps))
		m.Errors += p.Errors
		m.Other += p.Other
	}
	return m
}
