// Command tilemisses measures tile misses of tileapi, its quota and tile
// cache in Redis, against pg_tileserv on the same PostGIS and the same
// places tiles, at several zooms, without compression and with gzip, the
// two taking turns in every round. tileapi runs with a tile cache TTL of a
// millisecond, so every tile it is asked for is rendered and written to
// Redis: the whole cost of a miss, on tiles that may repeat (z3 has at
// most 64). Beside req/s it reports the CPU time a request of each process
// on the path (the server, PostgreSQL's backends, Redis, itself), read from
// /proc: on a machine shared with other work req/s measures the share of
// the CPU each server got as much as the server, CPU time a request does
// not. See docs/benchmarks.md.
//
//	go run ./loadtest/cmd/tilemisses -database-url URL -pg-tileserv BIN [-zooms 10,6,3] [-clients 16] [-phase 3s] [-rounds 2] [-tileserv-low]
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/maptile"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/seed"
	"github.com/tileapi/tileapi/loadtest"
	"github.com/tileapi/tileapi/tiles"
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

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tilemisses", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	var (
		databaseURL = fs.String("database-url", getenv("DATABASE_URL"), "PostGIS on loopback after tileapi migrate && tileapi load ($DATABASE_URL)")
		redis       = fs.String("redis-url", redisURL, "Redis of tileapi's quota and tile cache, on loopback ($REDIS_URL)")
		tileserv    = fs.String("pg-tileserv", "", "the pg_tileserv binary")
		bin         = fs.String("bin", "", "tileapi binary to start; empty: go build it")
		before      = fs.String("bin-before", "", "another tileapi binary to measure beside it, as \"before\" (a build of an earlier commit)")
		zoomList    = fs.String("zooms", "10,6,3", "comma-separated zooms of the places tiles")
		clients     = fs.Int("clients", 16, "concurrent clients")
		phase       = fs.Duration("phase", 3*time.Second, "how long each setup, zoom and encoding is driven in a round (at most 1m)")
		rounds      = fs.Int("rounds", 2, "rounds (1-20)")
		conns       = fs.Int("tileserv-conns", 10, "pg_tileserv's pool, the size of tileapi's by default")
		tileservLow = fs.Bool("tileserv-low", false, "also measure pg_tileserv reading places_low, as tileapi does, at zooms up to tiles.LowPlacesZoom (\"pg_tileserv low\")")
		pprofAddr   = fs.String("pprof-addr", "", "tileapi's TILEAPI_PPROF_ADDR, to profile it during the run")
		out         = fs.String("out", "", "write the phases as JSON to this file")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *databaseURL == "" || *tileserv == "":
		return errors.New("tilemisses needs -database-url and -pg-tileserv")
	case *clients < 1 || *clients > 256 || *phase <= 0 || *phase > time.Minute || *rounds < 1 || *rounds > 20:
		return errors.New("-clients 1-256, -phase in (0, 1m], -rounds 1-20")
	}
	var zooms []maptile.Zoom
	for _, s := range strings.Split(*zoomList, ",") {
		z, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || z < 0 || z > 14 {
			return fmt.Errorf("-zooms: %q is not a zoom 0-14", s)
		}
		zooms = append(zooms, maptile.Zoom(z))
	}
	for _, u := range []string{*databaseURL, *redis} {
		if err := loadtest.CheckLoopback(u); err != nil {
			return err
		}
	}
	redisOpt, err := goredis.ParseURL(*redis)
	if err != nil {
		return fmt.Errorf("-redis-url: %w", err)
	}
	tmp, err := os.MkdirTemp("", "tilemisses-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		fmt.Fprintln(stderr, "building tileapi ...")
		if *bin, err = loadtest.Build(ctx, tmp); err != nil {
			return err
		}
	}
	pool, err := pgxpool.New(ctx, *databaseURL)
	if err != nil {
		return fmt.Errorf("-database-url: %w", err)
	}
	defer pool.Close()
	if err := seed.Renew(ctx, pool); err != nil { // no tile of an earlier run is cached
		return err
	}
	schema, err := loadtest.PrepareView(ctx, pool)
	if err != nil {
		return err
	}
	plan := loadtest.Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []loadtest.Limit{{Name: "second", Max: 1 << 40, Window: time.Second}}}
	env := []string{"TILEAPI_TILE_CACHE_TTL=1ms"}
	if *pprofAddr != "" {
		env = append(env, "TILEAPI_PPROF_ADDR="+*pprofAddr)
	}
	bins := map[string]string{"tileapi": *bin}
	if *before != "" {
		bins["before"] = *before
	}
	var apis []loadtest.Setup
	pids := map[string]int{}
	for _, name := range []string{"tileapi", "before"} {
		if bins[name] == "" {
			continue
		}
		if name == "before" {
			env = env[:1] // one server profiled
		}
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err := loadtest.StartFleet(ctx, loadtest.FleetConfig{Bin: bins[name], Dir: dir, RedisURL: *redis, DatabaseURL: *databaseURL,
			Instances: 1, Keys: 1, Plan: plan, Logs: stderr, Env: env,
			// Every tile measured is served and metered: on a busy machine a
			// charge may take longer than the default 50 ms, and a 503 is
			// cheaper than a tile.
			QuotaTimeout: "1s"})
		if err != nil {
			return err
		}
		defer f.Stop()
		apis = append(apis, loadtest.Setup{Name: name, URL: f.URLs()[0], Secret: f.Keys[0].Secret})
		pids[name] = f.Instances[0].Pid()
	}
	ts, err := loadtest.StartTileserv(ctx, *tileserv, *databaseURL, *conns, io.Discard)
	if err != nil {
		return err
	}
	defer ts.Stop()
	pids["pg_tileserv"], pids[tileservLowName] = ts.Pid(), ts.Pid()
	rdb := goredis.NewClient(redisOpt)
	defer rdb.Close()
	redisPid, err := loadtest.RedisPid(ctx, rdb)
	if err != nil {
		return err
	}
	pids[loadtest.CPURedis], pids[loadtest.CPULoadTool] = redisPid, os.Getpid()
	var mz []loadtest.MissZoom
	lowZoom := maptile.Zoom(tiles.LowPlacesZoom) // read before the loop's tiles hides the package
	for _, z := range zooms {
		tiles, err := loadtest.PlacesTiles(ctx, pool, z, uint64(z))
		if err != nil {
			return err
		}
		path, err := loadtest.TileservZoomPath(schema, z)
		if err != nil {
			return err
		}
		setups := append(slices.Clone(apis), loadtest.Setup{Name: "pg_tileserv", URL: ts.URL, TilePath: path})
		if *tileservLow && z <= lowZoom {
			path, err := loadtest.TileservLowZoomPath(schema, z)
			if err != nil {
				return err
			}
			setups = append(setups, loadtest.Setup{Name: tileservLowName, URL: ts.URL, TilePath: path})
		}
		for _, pgts := range setups[len(apis):] {
			check, err := loadtest.CompareTiles(ctx, apis[0], pgts, tiles[:min(32, len(tiles))])
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "z%d: %d tiles; %d checked draw %d places; bytes a tile: tileapi %.0f, %s %.0f\n",
				z, len(tiles), check.Tiles, check.Features, check.Bytes[0], pgts.Name, check.Bytes[1])
			if len(check.Differ) > 0 {
				return fmt.Errorf("z%d: tileapi and %s draw different tiles: %s", z, pgts.Name, strings.Join(check.Differ, "\n"))
			}
		}
		mz = append(mz, loadtest.MissZoom{Zoom: z, Tiles: tiles, Setups: setups})
	}
	cpu := func(ctx context.Context) (map[string]time.Duration, error) {
		return loadtest.ProcessesCPU(ctx, pool, pids)
	}
	phases, err := loadtest.Misses(ctx, loadtest.MissesConfig{Zooms: mz, Clients: *clients, Phase: *phase, Rounds: *rounds, Progress: stderr, CPU: cpu})
	if err != nil {
		return err
	}
	if *out != "" {
		b, err := json.MarshalIndent(phases, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Clean(*out), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "`go run ./loadtest/cmd/tilemisses %s`: %d clients, %v a phase, %d rounds, pg_tileserv pool %d\n\n",
		strings.Join(args, " "), *clients, *phase, *rounds, *conns)
	if err := loadtest.WriteMissesTable(stdout, phases, "pg_tileserv"); err != nil {
		return err
	}
	fmt.Fprint(stdout, "\nCPU milliseconds a request, by process (PostgreSQL: the database's backends):\n\n")
	return loadtest.WriteMissesCPUTable(stdout, phases, "pg_tileserv")
}

// tileservLowName is the setup of pg_tileserv reading places_low
// (-tileserv-low): the same server as pg_tileserv, another layer.
const tileservLowName = "pg_tileserv low"
