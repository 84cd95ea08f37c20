package loadtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/seed"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
)

// loadedSchema returns the URL of a new schema loaded by `tileapi load`,
// and a pool on it.
func loadedSchema(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	u := spatialtest.Schema(t)
	cmd := exec.Command(tileapiBinary(t), "load")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+u)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tileapi load: %v\n%s", err, out)
	}
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return u, pool
}

// tableLayerFile makes the view of the places in the loaded schema of pool
// and returns a layers file declaring it as TableLayer.
func tableLayerFile(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	schema, err := PrepareView(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	path, err := WriteTableLayer(t.TempDir(), schema)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// A small run of the throughput scenario on PostGIS: every tile of the miss
// phases must be a real miss, in process and in Redis, on the places
// layer and on the table layer, and each setup a new tile each time.
func TestPostGISThroughputScenario(t *testing.T) {
	ctx := context.Background()
	dbURL, pool := loadedSchema(t)
	tiles, err := PlacesTiles(ctx, pool, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The bundled places fall in 34,384 tiles of zoom 10, each listed once.
	seen := map[maptile.Tile]bool{}
	for _, tl := range tiles {
		if seen[tl] || tl.Z != 10 || tl.X >= 1<<10 || tl.Y >= 1<<10 {
			t.Fatalf("tile %v repeated or out of range", tl)
		}
		seen[tl] = true
	}
	if len(tiles) != 34384 {
		t.Errorf("%d z10 tiles hold places, want 34384", len(tiles))
	}
	if !seen[maptile.At(orb.Point{2.3522, 48.8566}, 10)] {
		t.Error("the tile of Paris is not listed")
	}
	// Renewed, the data version keys a Redis tile cache no earlier run filled.
	if err := seed.Renew(ctx, pool); err != nil {
		t.Fatal(err)
	}
	plan := Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []Limit{{Name: "second", Window: time.Second, Max: 1 << 40}}}
	// A quota call may take long on a busy machine: a 503 here would say
	// nothing about the scenario.
	layersFile := tableLayerFile(t, pool)
	mem := startFleet(t, FleetConfig{DatabaseURL: dbURL, Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s", LayersFile: layersFile})
	red := startFleet(t, FleetConfig{DatabaseURL: dbURL, RedisURL: testenv.RedisURL(t), Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s", LayersFile: layersFile})
	setups := []Setup{
		{Name: "in process", URL: mem.URLs()[0], Secret: mem.Keys[0].Secret},
		{Name: "redis", URL: red.URLs()[0], Secret: red.Keys[0].Secret},
	}
	// As many misses as the list holds past the hits: the phase must stop
	// when they run out, not draw one twice.
	few := tiles[:HitTiles+150]
	rep, err := Throughput(ctx, ThroughputConfig{Setups: setups, Clients: 2, Phase: 300 * time.Millisecond,
		MaxRequests: 5000, Tiles: few, TableLayer: TableLayer, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stats) != 10 || len(rep.Ratios) != 5 || len(rep.Overhead) != 5 {
		t.Fatalf("%d route stats, %d ratios, %d overheads; want 10, 5 and 5", len(rep.Stats), len(rep.Ratios), len(rep.Overhead))
	}
	for _, st := range rep.Stats {
		if st.Errors > 0 || st.Other > 0 || len(st.Latencies) == 0 || st.Bytes <= 0 {
			t.Errorf("%s %s: %d requests, %d errors, %d answered by the cache otherwise than the route says, %d measured, %.0f bytes",
				st.Setup, st.Route, st.Requests, st.Errors, st.Other, len(st.Latencies), st.Bytes)
		}
		if (st.Route == RouteTileMiss || st.Route == RouteTableMiss) && st.Requests > 150 {
			t.Errorf("%s: %d misses from a list of 150", st.Setup, st.Requests)
		}
	}
	var md strings.Builder
	if err := WriteThroughputMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
	for _, want := range []string{"| tile MISS |", "| table layer MISS |", "redis / in process", "Bytes per tile", "table layer MISS over tile MISS: in process"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown table lacks %q", want)
		}
	}
	if err := PlotRPS(t.TempDir()+"/rps.png", rep); err != nil {
		t.Fatal(err)
	}

	// The tile check must pass the same tiles from both setups, and catch
	// a server that draws other places: here tileapi asked for z11 tiles
	// at z10 coordinates.
	check, err := CompareTiles(ctx, setups[0], setups[1], tiles[:20])
	if err != nil {
		t.Fatal(err)
	}
	if len(check.Differ) > 0 || check.Features == 0 || check.Bytes[0] != check.Bytes[1] {
		t.Errorf("in process against Redis: %+v; want the same tiles", check)
	}
	other := setups[1]
	other.TilePath = "/v1/tiles/places/11/{x}/{y}.mvt"
	if check, err = CompareTiles(ctx, setups[0], other, tiles[:20]); err != nil {
		t.Fatal(err)
	}
	if len(check.Differ) == 0 {
		t.Errorf("z10 against z11 tiles: %+v; want differences", check)
	}
}

// The table layer the load tool declares over a view of the places must
// draw what the bundled places layer draws, thinning included: the same
// places, ids, names and populations at the same points, on tiles of the
// zooms where the places are thinned and of those where they are not.
func TestTableLayerDrawsThePlaces(t *testing.T) {
	ctx := context.Background()
	dbURL, pool := loadedSchema(t)
	plan := Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []Limit{{Name: "second", Window: time.Second, Max: 1 << 40}}}
	mem := startFleet(t, FleetConfig{DatabaseURL: dbURL, Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s", LayersFile: tableLayerFile(t, pool)})
	places := Setup{Name: "places layer", URL: mem.URLs()[0], Secret: mem.Keys[0].Secret}
	table := places
	table.Name, table.Layer = "table layer", TableLayer
	for _, z := range []maptile.Zoom{2, 5, 8, 10, 13} {
		tiles, err := PlacesTiles(ctx, pool, z, uint64(z))
		if err != nil {
			t.Fatal(err)
		}
		check, err := CompareTiles(ctx, places, table, tiles[:min(len(tiles), 12)])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("z%d: %d tiles, %d places; bytes a tile: places layer %.0f, table layer %.0f", z, check.Tiles, check.Features, check.Bytes[0], check.Bytes[1])
		if len(check.Differ) > 0 || check.Features == 0 {
			t.Errorf("z%d: the table layer draws other places than the places layer (%d places):\n%s", z, check.Features, strings.Join(check.Differ, "\n"))
		}
	}
}
