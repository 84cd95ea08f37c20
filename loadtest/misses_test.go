package loadtest

import (
	"context"
	"github.com/tileapi/tileapi/tiles"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/testenv"
)

// A small run of Misses: with a tile cache whose tiles last a
// millisecond, tileapi renders every tile it is asked for, however often;
// each setup is measured on each zoom, without compression and with gzip,
// and the tables compare them, in req/s and in CPU time.
func TestMisses(t *testing.T) {
	ctx := context.Background()
	dbURL, pool := loadedSchema(t)
	plan := Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []Limit{{Name: "second", Window: time.Second, Max: 1 << 40}}}
	env := []string{"TILEAPI_TILE_CACHE_TTL=1ms"}
	red := startFleet(t, FleetConfig{DatabaseURL: dbURL, RedisURL: testenv.RedisURL(t), Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s", Env: env})
	mem := startFleet(t, FleetConfig{DatabaseURL: dbURL, Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s", Env: env})
	setups := []Setup{
		{Name: "cache in redis", URL: red.URLs()[0], Secret: red.Keys[0].Secret},
		{Name: "in process", URL: mem.URLs()[0], Secret: mem.Keys[0].Secret},
	}
	var zooms []MissZoom
	for _, z := range []maptile.Zoom{3, 10} {
		tiles, err := PlacesTiles(ctx, pool, z, 1)
		if err != nil {
			t.Fatal(err)
		}
		zooms = append(zooms, MissZoom{Zoom: z, Tiles: tiles[:min(len(tiles), 200)], Setups: setups})
	}
	pids := map[string]int{"cache in redis": red.Instances[0].Pid(), "in process": mem.Instances[0].Pid(), CPULoadTool: os.Getpid()}
	cpu := func(ctx context.Context) (map[string]time.Duration, error) { return ProcessesCPU(ctx, nil, pids) }
	phases, err := Misses(ctx, MissesConfig{Zooms: zooms, Clients: 2, Phase: time.Second, Rounds: 2, CPU: cpu})
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != 2*2*2*2 {
		t.Fatalf("%d phases, want 16 (2 rounds, zooms, encodings and setups)", len(phases))
	}
	used := map[string]time.Duration{}
	z3 := map[string]int{}
	for _, p := range phases {
		// A tile written and read back within its millisecond is a hit;
		// two clients walking 38 tiles or more ask again only long after.
		if p.Requests == 0 || p.Errors > 0 || p.Other > p.Requests/20 || p.Bytes <= 0 {
			t.Errorf("%+v: want misses only, all served", p)
		}
		for name, d := range p.CPU {
			used[name] += d
		}
		if p.Zoom == 3 {
			z3[p.Setup] += p.Requests
		}
	}
	for _, s := range setups {
		if z3[s.Name] <= 38 {
			t.Errorf("%s: %d misses at z3: want its 38 tiles asked for more than once", s.Name, z3[s.Name])
		}
	}
	// A phase may fall between two of the kernel's 10 ms ticks; the run
	// does not.
	for _, name := range []string{"cache in redis", "in process", CPULoadTool} {
		if used[name] <= 0 {
			t.Errorf("%s: no CPU time measured over the run", name)
		}
	}
	var md strings.Builder
	if err := WriteMissesTable(&md, phases, "in process"); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
	for _, want := range []string{"over in process", "| z3 | identity | cache in redis |", "| z10 | gzip | in process |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	md.Reset()
	if err := WriteMissesCPUTable(&md, phases, "in process"); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
	if !strings.Contains(md.String(), "| z10 | gzip | cache in redis |") {
		t.Errorf("the CPU table lacks z10 gzip cache in redis")
	}
	for _, write := range []func(io.Writer, []MissPhase, string) error{WriteMissesTable, WriteMissesCPUTable} {
		if err := write(io.Discard, phases, "pg_tileserv"); err == nil {
			t.Error("a table against a setup not measured: want an error")
		}
	}
}

// pg_tileserv's path thins the places as tileapi's places layer does:
// no filter from zoom 10, the places of 250,000 people or more at z3.
func TestTileservZoomPath(t *testing.T) {
	for _, c := range []struct {
		z      maptile.Zoom
		filter string
	}{{10, ""}, {3, "population >= 250000"}, {6, "population >= 25000"}} {
		p, err := TileservZoomPath("public", c.z)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		if got := q.Get("filter"); got != c.filter {
			t.Errorf("z%d: filter %q, want %q", c.z, got, c.filter)
		}
		if limit := q.Get("limit"); (c.filter != "") != (limit == "1000") {
			t.Errorf("z%d: limit %q", c.z, limit)
		}
		if !strings.HasPrefix(p, TileservPath("public")) {
			t.Errorf("z%d: %s does not extend %s", c.z, p, TileservPath("public"))
		}
	}
}

// Over places_low, pg_tileserv's path reads the view of it with the same
// thinning, and only at the zooms whose places places_low holds.
func TestTileservLowZoomPath(t *testing.T) {
	p, err := TileservLowZoomPath("public", 3)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := TileservZoomPath("public", 3)
	if want := strings.Replace(full, "."+PlacesView+"/", "."+PlacesLowView+"/", 1); p != want {
		t.Errorf("z3: %s, want %s", p, want)
	}
	if p, err := TileservLowZoomPath("public", tiles.LowPlacesZoom+1); err == nil {
		t.Errorf("z%d: %s, want an error", tiles.LowPlacesZoom+1, p)
	}
}

// ProcessCPU reads this process's CPU time, which grows as it works, and
// fails on a process that does not exist.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for x, start := 0, time.Now(); time.Since(start) < 100*time.Millisecond; x++ {
		_ = x * x
	}
	after, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("CPU time %v after 100 ms of work, %v before", after, before)
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Error("a process that does not exist: want an error")
	}
}

// A setup measured at some zooms only (pg_tileserv over places_low) has
// rows at those zooms and no empty ones elsewhere.
func TestWriteMissesTableSetupOfSomeZooms(t *testing.T) {
	phases := []MissPhase{
		{Setup: "tileapi", Zoom: 10, RPS: 300}, {Setup: "pg_tileserv", Zoom: 10, RPS: 100},
		{Setup: "tileapi", Zoom: 3, RPS: 200}, {Setup: "pg_tileserv", Zoom: 3, RPS: 100}, {Setup: "pg_tileserv low", Zoom: 3, RPS: 400},
	}
	var md strings.Builder
	if err := WriteMissesTable(&md, phases, "pg_tileserv"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(md.String(), "pg_tileserv low"); got != 1 {
		t.Errorf("%d rows of pg_tileserv low, want 1 (z3):\n%s", got, md.String())
	}
	if !strings.Contains(md.String(), "| z3 | identity | pg_tileserv low | 400 |") || !strings.Contains(md.String(), "| 4.00x |") {
		t.Errorf("no z3 row of pg_tileserv low at 4.00x:\n%s", md.String())
	}
}
