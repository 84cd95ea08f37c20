// Command loadtest runs tileapi's load scenarios against servers on this
// machine and reports what happened: a verdict per key on the quota's
// exactness, and requests per second and latency per route with the quota
// in Redis and in process. See docs/testing.md, "The load tool".
//
//	go run ./loadtest/cmd/loadtest [-scenario exactness|throughput|all] [flags]
//	go run ./loadtest/cmd/loadtest -scenario throughput -spatial postgis -database-url URL [-pg-tileserv BIN]
//	go run ./loadtest/cmd/loadtest -scenario throughput -plan pro -throughput-clients 8,16,32,64 [-usage-ab]
//
// By default it builds tileapi and starts the servers itself, each on a
// free loopback port with the bundled data in memory (with -spatial
// postgis, on the database, with a table layer over a view of the places
// beside the bundled places, and with -pg-tileserv, pg_tileserv on that
// view beside them); with -targets it drives servers already running
// instead (exactness only). It only talks to
// loopback addresses, and every run is bounded by -duration, -phase and
// -max-requests. Tables go to stdout (JSON with -json), the progress bar to
// stderr, plots, results.json and throughput.md (a Markdown table) to -out.
// It exits 1 if any key failed. loadtest/postgis.sh runs the PostGIS
// scenario and refreshes its table in docs/benchmarks.md and the plots.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/maptile"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/seed"
	"github.com/tileapi/tileapi/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// errFailed says that the run finished and some key failed its verdict.
var errFailed = errors.New("loadtest: the quota was not exact: see the table")

type config struct {
	scenario, redisURL, targets, adminTargets, secrets, adminToken, bin, out, limits string
	quotaTimeout, spatial, databaseURL, tileserv, cpuProfile, plan                   string
	instances, keys, clients, maxRequests, rounds                                    int
	throughputClients                                                                []int // a step each
	duration, phase                                                                  time.Duration
	jsonOut, usageAB                                                                 bool
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	fs.StringVar(&c.scenario, "scenario", "all", "exactness, throughput or all")
	fs.StringVar(&c.redisURL, "redis-url", redisURL, "Redis shared by the servers, on loopback ($REDIS_URL)")
	fs.StringVar(&c.targets, "targets", "", "comma-separated base URLs of running servers sharing -redis-url (exactness only); empty: start -instances")
	fs.StringVar(&c.adminTargets, "admin-targets", "", "with -targets: the base URLs of their admin listeners (TILEAPI_ADMIN_ADDR), in the same order; empty: -targets themselves")
	fs.StringVar(&c.secrets, "key-secrets", "", "with -targets: comma-separated API keys to charge, with distinct first four characters")
	fs.StringVar(&c.adminToken, "admin-token", getenv("TILEAPI_ADMIN_TOKEN"), "with -targets: the admin token, to look up the keys' ids ($TILEAPI_ADMIN_TOKEN)")
	fs.StringVar(&c.bin, "bin", "", "tileapi binary to start; empty: go build it")
	fs.StringVar(&c.out, "out", "loadtest/out", "directory for the plots and results.json")
	fs.StringVar(&c.limits, "limits", "burst:60:1s,window:250:5s", "the exactness plan's limits, name:max:window,...")
	fs.StringVar(&c.spatial, "spatial", "memory", "where the throughput servers run their spatial queries: memory (the bundled data) or postgis (-database-url)")
	fs.StringVar(&c.databaseURL, "database-url", getenv("DATABASE_URL"), "with -spatial postgis: PostGIS on loopback after tileapi migrate && tileapi load ($DATABASE_URL)")
	fs.StringVar(&c.tileserv, "pg-tileserv", "", "with -spatial postgis: a pg_tileserv binary to measure on tile misses beside tileapi, on the same database and tiles")
	fs.StringVar(&c.quotaTimeout, "quota-timeout", "", "TILEAPI_QUOTA_TIMEOUT of the servers started (they fail closed); empty: their default, 50ms")
	fs.IntVar(&c.instances, "instances", 3, "servers to start for the exactness scenario")
	fs.IntVar(&c.keys, "keys", 4, "keys to create for the exactness scenario")
	fs.IntVar(&c.clients, "clients", 16, "concurrent clients per key (exactness)")
	throughputClients := fs.String("throughput-clients", "8", "concurrent clients (throughput); comma-separated counts, such as 8,16,32,64, measure a step at each, one after the other")
	fs.StringVar(&c.plan, "plan", "", "the throughput scenario's keys are on this compiled-in plan (free or pro: limits of 5 s, a minute and a month, an in-flight limit), "+
		strconv.Itoa(planKeys)+" keys a server, a request on one drawn at random; empty: one key on a plan of the tool's that never denies")
	fs.IntVar(&c.rounds, "rounds", 1, "the throughput scenario's steps are run this many times, the setups in the opposite order every other time, so that a ratio of two setups is of many pairs measured both ways (1-20)")
	fs.BoolVar(&c.usageAB, "usage-ab", false, "the throughput scenario measures two servers with the quota in Redis, the usage history off (TILEAPI_USAGE=off) and on, instead of in process and in Redis")
	fs.IntVar(&c.maxRequests, "max-requests", 1_000_000, "most requests of the exactness run, and of each throughput phase")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "how long the exactness scenario drives the servers (at most 5m)")
	fs.DurationVar(&c.phase, "phase", 5*time.Second, "how long the throughput scenario drives each route of each setup (at most 1m)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the load tool's own CPU profile to this file (the servers': TILEAPI_PPROF_ADDR)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the reports as JSON instead of tables")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, f := range strings.Split(*throughputClients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			return c, fmt.Errorf("-throughput-clients %q: want counts from 1 to 256, comma-separated", *throughputClients)
		}
		c.throughputClients = append(c.throughputClients, n)
	}
	if c.plan != "" && (c.plan == plans.Anonymous || !slices.Contains(plans.Defaults().Names(), c.plan)) {
		return c, fmt.Errorf("-plan %q: want a compiled-in key plan: %s", c.plan, strings.Join(slices.DeleteFunc(plans.Defaults().Names(), func(n string) bool { return n == plans.Anonymous }), ", "))
	}
	switch {
	case c.scenario != "exactness" && c.scenario != "throughput" && c.scenario != "all":
		return c, fmt.Errorf("-scenario %q: want exactness, throughput or all", c.scenario)
	case c.duration <= 0 || c.duration > 5*time.Minute || c.phase <= 0 || c.phase > time.Minute:
		return c, errors.New("-duration must be in (0, 5m] and -phase in (0, 1m]")
	case c.instances < 1 || c.instances > 16 || c.keys < 1 || c.keys > 100 || c.clients < 1 || c.clients > 256 ||
		c.maxRequests < 1 || c.maxRequests > 10_000_000:
		return c, errors.New("-instances 1-16, -keys 1-100, -clients 1-256, -max-requests 1-10,000,000")
	case (c.plan != "" || c.usageAB || c.rounds != 1) && c.scenario != "throughput":
		return c, errors.New("-plan, -usage-ab and -rounds are of the throughput scenario (-scenario throughput)")
	case c.rounds < 1 || c.rounds > 20:
		return c, errors.New("-rounds 1-20")
	case c.targets != "" && c.secrets == "":
		return c, errors.New("-targets needs -key-secrets")
	case c.spatial != "memory" && c.spatial != "postgis":
		return c, fmt.Errorf("-spatial %q: want memory or postgis", c.spatial)
	case c.spatial == "postgis" && (c.scenario != "throughput" || c.databaseURL == ""):
		return c, errors.New("-spatial postgis runs the throughput scenario only (-scenario throughput), and needs -database-url")
	case c.tileserv != "" && c.spatial != "postgis":
		return c, errors.New("-pg-tileserv needs -spatial postgis")
	}
	if c.spatial == "postgis" {
		if err := loadtest.CheckLoopback(c.databaseURL); err != nil {
			return c, fmt.Errorf("-database-url: %w", err)
		}
	}
	return c, loadtest.CheckLoopback(c.redisURL)
}

// parseLimits reads "name:max:window,...".
func parseLimits(s string) ([]loadtest.Limit, error) {
	var ls []loadtest.Limit
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(strings.TrimSpace(part), ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("-limits: %q is not name:max:window", part)
		}
		max, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-limits: %q: %w", part, err)
		}
		w, err := time.ParseDuration(f[2])
		if err != nil {
			return nil, fmt.Errorf("-limits: %q: %w", part, err)
		}
		ls = append(ls, loadtest.Limit{Name: f[0], Max: max, Window: w})
	}
	return ls, nil
}

// report is what -json prints and results.json holds.
type report struct {
	Command   string                    `json:"command"`
	Spatial   string                    `json:"spatial"`
	Exactness *loadtest.ExactnessReport `json:"exactness,omitempty"`
	// Throughput is a report a count of -throughput-clients.
	Throughput []*loadtest.ThroughputReport `json:"throughput,omitempty"`
	// With -spatial postgis: the checks that tileapi's places layer, its
	// table layer over the same places and, with -pg-tileserv,
	// pg_tileserv draw the same places in the hit tiles; and pg_tileserv's
	// --version.
	Tileserv   string                `json:"pg_tileserv,omitempty"`
	TileChecks []*loadtest.TileCheck `json:"tile_checks,omitempty"`
	// PostgresWrites are the rows written to the usage history
	// (usage_hourly) and the ledger's batches (quota_ledger_batches)
	// over a run on PostGIS, as pg_stat_user_tables counts them.
	PostgresWrites map[string]int64 `json:"postgres_writes,omitempty"`
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	limits, err := parseLimits(c.limits)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	tmp, err := os.MkdirTemp("", "loadtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if c.bin == "" && (c.targets == "" || c.scenario != "exactness") {
		fmt.Fprintln(stderr, "building tileapi ...")
		if c.bin, err = loadtest.Build(ctx, tmp); err != nil {
			return err
		}
	}
	opt, err := redis.ParseURL(c.redisURL)
	if err != nil {
		return fmt.Errorf("-redis-url: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	logs, err := os.Create(filepath.Join(c.out, "servers.log"))
	if err != nil {
		return err
	}
	defer logs.Close()

	rep := report{Command: "loadtest " + strings.Join(args, " "), Spatial: c.spatial}
	if c.scenario != "throughput" {
		if rep.Exactness, err = exactness(ctx, c, limits, rdb, tmp, logs, stderr); err != nil {
			return err
		}
	}
	if c.scenario != "exactness" {
		if err := throughput(ctx, c, tmp, rdb, logs, stderr, &rep); err != nil {
			return err
		}
	}

	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "results.json"), b, 0o644); err != nil {
		return err
	}
	if c.jsonOut {
		if _, err := stdout.Write(append(b, '\n')); err != nil {
			return err
		}
	} else {
		if rep.Exactness != nil {
			if err := loadtest.WriteExactnessTable(stdout, rep.Exactness); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		for _, t := range rep.Throughput {
			fmt.Fprintf(stdout, "%d clients:\n", t.Clients)
			if err := loadtest.WriteThroughputTable(stdout, t); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		if rep.Throughput != nil {
			if err := loadtest.WriteQuotaMarkdown(stdout, rep.Throughput); err != nil {
				return err
			}
		}
		for _, tc := range rep.TileChecks {
			writeTileCheck(stdout, tc)
		}
	}
	fmt.Fprintf(stderr, "plots, results.json and the servers' log are in %s\n", c.out)
	if rep.Exactness != nil && !rep.Exactness.OK {
		return errFailed
	}
	return nil
}

func exactness(ctx context.Context, c config, limits []loadtest.Limit, rdb redis.UniversalClient, tmp string, logs, stderr io.Writer) (*loadtest.ExactnessReport, error) {
	ec := loadtest.ExactnessConfig{
		AdminToken: c.adminToken, Redis: rdb, ClientsPerKey: c.clients, Duration: c.duration,
		MaxRequests: c.maxRequests, Seed: uint64(time.Now().UnixNano()), Progress: stderr,
	}
	if c.targets != "" {
		ec.Targets = strings.Split(c.targets, ",")
		if c.adminTargets != "" {
			ec.AdminTargets = strings.Split(c.adminTargets, ",")
		}
		for _, s := range strings.Split(c.secrets, ",") {
			ec.Keys = append(ec.Keys, loadtest.Key{Secret: s})
		}
	} else {
		fmt.Fprintf(stderr, "starting %d servers sharing %s ...\n", c.instances, c.redisURL)
		f, err := loadtest.StartFleet(ctx, loadtest.FleetConfig{
			Bin: c.bin, Dir: tmp, RedisURL: c.redisURL, Instances: c.instances, Keys: c.keys, Logs: logs, QuotaTimeout: c.quotaTimeout,
			Plan: loadtest.Plan{Name: "loadtest", MaxRadius: 10_000, Limits: limits},
			// Keys of this run's own: a run after another starts afresh.
			RedisPrefix: fmt.Sprintf("loadtest:%d:", time.Now().UnixNano()),
		})
		if err != nil {
			return nil, err
		}
		defer f.Stop()
		ec.Targets, ec.AdminTargets, ec.Keys, ec.AdminToken, ec.Prefix = f.URLs(), f.AdminURLs(), f.Keys, f.AdminToken, f.QuotaPrefix
	}
	rep, err := loadtest.Exactness(ctx, ec)
	if err != nil {
		return nil, err
	}
	for i, k := range rep.Keys {
		if err := loadtest.PlotKey(filepath.Join(c.out, fmt.Sprintf("exactness-key%d.png", k.Key.ID)), rep, i); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// throughput measures a server with its quota in process against one with
// its quota (and tile cache) in Redis (with -usage-ab, two in Redis, the
// usage history off and on), on a plan that never denies or, with -plan,
// on a compiled-in plan; with -spatial postgis, also their tile misses on
// a table layer over the places (a view of them, declared in a layers
// file), and with -pg-tileserv, pg_tileserv on tile misses of the same
// view. Each count of -throughput-clients is a step of its own, on its own
// share of the miss tiles. It fills rep and writes the plots and
// throughput.md (the tables of docs/benchmarks.md) to c.out.
// The tool's plan has one limit of one second: the in-process store sums
// its whole window on every call, so a long window would slow the
// baseline as the run fills it, and flatter Redis.
func throughput(ctx context.Context, c config, tmp string, rdb *redis.Client, logs, stderr io.Writer, rep *report) error {
	plan := loadtest.Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []loadtest.Limit{
		{Name: "second", Max: 1 << 40, Window: time.Second}, // the largest max a limit may have
	}}
	keys := 1
	if c.plan != "" {
		plan, keys = loadtest.Plan{Name: c.plan}, planKeys // no limits: the compiled-in plan
	}
	rngSeed := uint64(time.Now().UnixNano())
	var databaseURL string
	var tiles []maptile.Tile
	var pool *pgxpool.Pool
	var viewSchema, layersFile string
	var writesBefore map[string]int64
	if c.spatial == "postgis" {
		var err error
		if pool, err = pgxpool.New(ctx, c.databaseURL); err != nil {
			return fmt.Errorf("-database-url: %w", err)
		}
		defer pool.Close()
		// A new data version: the servers started next key their tile
		// caches anew, so no tile an earlier run left in Redis is a hit.
		if err := seed.Renew(ctx, pool); err != nil {
			return err
		}
		if tiles, err = loadtest.PlacesTiles(ctx, pool, postgisZoom, rngSeed); err != nil {
			return err
		}
		databaseURL = c.databaseURL
		// The view pg_tileserv and the table layer serve, made before
		// either starts.
		if viewSchema, err = loadtest.PrepareView(ctx, pool); err != nil {
			return err
		}
		if layersFile, err = loadtest.WriteTableLayer(tmp, viewSchema); err != nil {
			return err
		}
		if writesBefore, err = loadtest.TableWrites(ctx, pool, writtenTables...); err != nil {
			return err
		}
	}
	type server struct {
		name, redisURL string
		noUsage        bool
	}
	servers := []server{{"in process", "", false}, {"redis", c.redisURL, false}}
	if c.usageAB {
		servers = []server{{"usage off", c.redisURL, true}, {"usage on", c.redisURL, false}}
	}
	var (
		setups []loadtest.Setup
		fleets []*loadtest.Fleet
		// The processes on a request's path, for the CPU time a request
		// takes in each (loadtest.ProcessesCPU).
		pids = map[string]int{loadtest.CPULoadTool: os.Getpid()}
	)
	redisPid, err := loadtest.RedisPid(ctx, rdb)
	if err != nil {
		return err
	}
	pids[loadtest.CPURedis] = redisPid
	stopFleets := func() error {
		var errs []error
		for _, f := range fleets {
			errs = append(errs, f.Stop())
		}
		fleets = nil
		return errors.Join(errs...)
	}
	defer stopFleets()
	runID := time.Now().UnixNano()
	for i, s := range servers {
		dir := filepath.Join(tmp, s.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "starting %s (%d keys on plan %s) ...\n", s.name, keys, plan.Name)
		f, err := loadtest.StartFleet(ctx, loadtest.FleetConfig{Bin: c.bin, Dir: dir, RedisURL: s.redisURL, DatabaseURL: databaseURL,
			Instances: 1, Keys: keys, Plan: plan, Logs: logs, QuotaTimeout: c.quotaTimeout, LayersFile: layersFile, NoUsage: s.noUsage,
			// Quotas and tile caches of this server's own: two servers on
			// one Redis neither share a key's units nor hit each other's tiles.
			RedisPrefix: fmt.Sprintf("loadtest:%d:%d:", runID, i)})
		if err != nil {
			return err
		}
		fleets = append(fleets, f)
		pids[loadtest.ServerCPU(s.name)] = f.Instances[0].Pid()
		setup := loadtest.Setup{Name: s.name, URL: f.URLs()[0], Secret: f.Keys[0].Secret}
		if keys > 1 {
			for _, k := range f.Keys {
				setup.Secrets = append(setup.Secrets, k.Secret)
			}
		}
		if s.redisURL != "" {
			setup.Redis = rdb
		}
		setup.Metrics = f.URLs()[0] + "/metrics"
		setups = append(setups, setup)
	}
	var tableLayer string
	if c.spatial == "postgis" {
		tableLayer = loadtest.TableLayer
		// What is compared on the tiles: tileapi's places layer, its table
		// layer over the same places and pg_tileserv. The hit tiles, which
		// the run fetches from tileapi anyway, none of them a miss.
		places, table := setups[0], setups[0]
		places.Name, table.Name, table.Layer = "places layer", "table layer", tableLayer
		pairs := [][2]loadtest.Setup{{places, table}}
		if c.tileserv != "" {
			in, err := loadtest.StartTileserv(ctx, c.tileserv, c.databaseURL, tileservConns, logs)
			if err != nil {
				return err
			}
			defer in.Stop()
			ts := loadtest.Setup{Name: "pg_tileserv", URL: in.URL, TilePath: loadtest.TileservPath(viewSchema)}
			pids[loadtest.ServerCPU(ts.Name)] = in.Pid()
			rep.Tileserv = loadtest.TileservVersion(ctx, c.tileserv)
			pairs = append(pairs, [2]loadtest.Setup{places, ts}, [2]loadtest.Setup{table, ts})
			setups = append(setups, ts)
		}
		for _, p := range pairs {
			tc, err := loadtest.CompareTiles(ctx, p[0], p[1], tiles[:loadtest.HitTiles])
			if err != nil {
				return err
			}
			rep.TileChecks = append(rep.TileChecks, tc)
			if len(tc.Differ) > 0 {
				writeTileCheck(stderr, tc)
				return fmt.Errorf("loadtest: %s and %s draw different tiles (pg_tileserv: %q): the comparison would be void", p[0].Name, p[1].Name, rep.Tileserv)
			}
		}
	}
	steps := len(c.throughputClients) * c.rounds
	for i := range steps {
		round, n := i/len(c.throughputClients), c.throughputClients[i%len(c.throughputClients)]
		order := setups
		if round%2 == 1 {
			// The other way round: what a setup gains from going first
			// or second cancels out over the rounds.
			order = slices.Clone(setups)
			order[0], order[1] = order[1], order[0]
		}
		t, err := loadtest.Throughput(ctx, loadtest.ThroughputConfig{
			Setups: order, Clients: n, Phase: c.phase, MaxRequests: c.maxRequests,
			Tiles: stepTiles(tiles, i, steps), TableLayer: tableLayer, Seed: rngSeed, Progress: stderr,
			CPU: func(ctx context.Context) (map[string]time.Duration, error) {
				return loadtest.ProcessesCPU(ctx, pool, pids)
			},
		})
		if err != nil {
			return err
		}
		rep.Throughput = append(rep.Throughput, t)
		suffix := ""
		if steps > 1 {
			suffix = fmt.Sprintf("-%d", n)
		}
		if c.rounds > 1 {
			suffix += fmt.Sprintf("-round%d", round+1)
		}
		if err := loadtest.PlotLatency(filepath.Join(c.out, "latency"+suffix+".png"), t); err != nil {
			return err
		}
		if err := loadtest.PlotRPS(filepath.Join(c.out, "rps"+suffix+".png"), t); err != nil {
			return err
		}
	}
	if err := stopFleets(); err != nil {
		return err
	}
	if pool != nil {
		// The servers have stopped, their backends gone: what they wrote
		// is counted.
		time.Sleep(time.Second)
		after, err := loadtest.TableWrites(ctx, pool, writtenTables...)
		if err != nil {
			return err
		}
		rep.PostgresWrites = map[string]int64{}
		for _, t := range writtenTables {
			rep.PostgresWrites[t] = after[t] - writesBefore[t]
		}
	}
	return writeThroughputMarkdown(c, rep)
}

// writtenTables are the tables whose writes a run on PostGIS counts: the
// usage history, and the ledger's batches, one a flush of a server.
var writtenTables = []string{"usage_hourly", "quota_ledger_batches"}

// planKeys is how many keys each server of -plan has: a load spread over
// them stays within a compiled-in plan's limits (pro: 200 units a second
// a key) at some ten thousand requests a second.
const planKeys = 64

// stepTiles is the share of tiles step i of n draws its misses from: the
// hit tiles, then the i-th n-th of the rest, so no step misses a tile an
// earlier one cached. Empty stays empty: random tiles.
func stepTiles(tiles []maptile.Tile, i, n int) []maptile.Tile {
	if len(tiles) <= loadtest.HitTiles {
		return tiles
	}
	hits, misses := tiles[:loadtest.HitTiles], tiles[loadtest.HitTiles:]
	share := misses[i*len(misses)/n : (i+1)*len(misses)/n]
	return append(slices.Clip(hits), share...)
}

// writeThroughputMarkdown writes throughput.md to c.out: each step's table,
// the quota's table and, with -usage-ab, the ratio of usage on to off.
func writeThroughputMarkdown(c config, rep *report) error {
	md, err := os.Create(filepath.Join(c.out, "throughput.md"))
	if err != nil {
		return err
	}
	defer md.Close()
	where := "the bundled data in memory"
	if c.spatial == "postgis" {
		where = fmt.Sprintf("spatial queries on PostGIS, the table layer %s over a view of the places (a layers file)", loadtest.TableLayer)
	}
	plan := "a plan that never denies"
	if c.plan != "" {
		plan = fmt.Sprintf("%d keys on the compiled-in plan %s, a request on one drawn at random", planKeys, c.plan)
	}
	rounds := ""
	if c.rounds > 1 {
		rounds = fmt.Sprintf(", %d rounds", c.rounds)
	}
	fmt.Fprintf(md, "`go run ./loadtest/cmd/%s`: %s clients, %v a route and setup%s, %s, %s", rep.Command, joinInts(c.throughputClients), c.phase, rounds, plan, where)
	if rep.Tileserv != "" {
		fmt.Fprintf(md, ", pg_tileserv (`%s --version`: %q) on the same database and z%d tiles", filepath.Base(c.tileserv), rep.Tileserv, postgisZoom)
	}
	fmt.Fprint(md, ":\n\n")
	for i, t := range rep.Throughput {
		switch {
		case c.rounds > 1:
			fmt.Fprintf(md, "%d clients, round %d:\n\n", t.Clients, i/len(c.throughputClients)+1)
		case len(rep.Throughput) > 1:
			fmt.Fprintf(md, "%d clients:\n\n", t.Clients)
		}
		if err := loadtest.WriteThroughputMarkdown(md, t); err != nil {
			return err
		}
		fmt.Fprintln(md)
	}
	if len(rep.TileChecks) > 0 {
		fmt.Fprintf(md, "Before the run, the %d hit tiles drew the same %d places on %s, at %s bytes a tile.\n\n",
			rep.TileChecks[0].Tiles, rep.TileChecks[0].Features, checkedSetups(rep.TileChecks), checkedBytes(rep.TileChecks))
	}
	fmt.Fprint(md, "The quota: the share of requests denied, served unmetered and refused for the quota's time budget, the charges tried again for reaching Redis late in their budget (tileapi_quota_late_retries_total), and in Redis its read events (round trips) and commands per request, a script's own commands counted (INFO stats and commandstats, the whole server's):\n\n")
	if err := loadtest.WriteQuotaMarkdown(md, rep.Throughput); err != nil {
		return err
	}
	versus := "in process"
	if c.usageAB {
		versus = "usage off"
	}
	fmt.Fprintf(md, "\nCPU milliseconds a request, by process, the mean of the rounds (read from /proc before and after each phase; PostgreSQL: the database's backends; Redis: the whole server's), and %s's total over each setup's, what its req/s over %s's would be on a machine that ran nothing else:\n\n", versus, versus)
	if err := loadtest.WriteCPUMarkdown(md, rep.Throughput, versus); err != nil {
		return err
	}
	if c.usageAB {
		mean, lo, hi, n := loadtest.RatioSummary(rep.Throughput, "usage on", "usage off")
		fmt.Fprintf(md, "\nUsage on over usage off, req/s: %.3fx, the geometric mean of %d ratios (a route at a client count in a round, the two measured one after the other, in the opposite order every other round), from %.2fx to %.2fx.\n", mean, n, lo, hi)
	}
	if rep.PostgresWrites != nil {
		var requests int
		for _, t := range rep.Throughput {
			for _, st := range t.Stats {
				requests += st.Requests
			}
		}
		fmt.Fprintf(md, "\nPostgreSQL rows written over the run (pg_stat_user_tables, read after the servers stopped), for %d requests on every setup: %d to usage_hourly, %d ledger batches (a flush of a server that had something to write, each one transaction).\n",
			requests, rep.PostgresWrites["usage_hourly"], rep.PostgresWrites["quota_ledger_batches"])
	}
	return md.Close()
}

// joinInts is "8, 16 and 32".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// postgisZoom is the zoom of the places tiles a run on PostGIS draws: the
// z10 tiles that hold a place (34,384 of the bundled data).
const postgisZoom = 10

// tileservConns is pg_tileserv's pool, the size of tileapi's by default.
const tileservConns = 10

// checkedSetups names the setups of checks, each once, in order:
// "tileapi's places layer, its table layer and pg_tileserv".
func checkedSetups(checks []*loadtest.TileCheck) string {
	names, _ := checked(checks)
	for i, n := range names {
		switch n {
		case "places layer":
			names[i] = "tileapi's places layer"
		case "table layer":
			names[i] = "its table layer"
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// checkedBytes is the mean tile size of each setup of checks, in the
// order of checkedSetups: "362, 362 and 405".
func checkedBytes(checks []*loadtest.TileCheck) string {
	_, sizes := checked(checks)
	s := make([]string, len(sizes))
	for i, b := range sizes {
		s[i] = fmt.Sprintf("%.0f", b)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// checked returns the setups of checks, each once, in order, and each
// one's mean tile size.
func checked(checks []*loadtest.TileCheck) ([]string, []float64) {
	var names []string
	var sizes []float64
	for _, c := range checks {
		for i, n := range c.Setups {
			if !slices.Contains(names, n) {
				names, sizes = append(names, n), append(sizes, c.Bytes[i])
			}
		}
	}
	return names, sizes
}

func writeTileCheck(w io.Writer, c *loadtest.TileCheck) {
	fmt.Fprintf(w, "tiles checked: %d (%d places); bytes a tile: %s %.0f, %s %.0f; %d differ\n",
		c.Tiles, c.Features, c.Setups[0], c.Bytes[0], c.Setups[1], c.Bytes[1], len(c.Differ))
	for _, d := range c.Differ {
		fmt.Fprintln(w, "  "+d)
	}
}
