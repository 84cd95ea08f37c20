//go:build pgtileserv

package loadtest

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The comparison with pg_tileserv: it must draw the same places as
// tileapi's places layer and its table layer over the same view, and be
// measured on tile misses only, of both. pg_tileserv is not a Go
// module this build can fetch, so the test is built only with its tag and
// the binary named (see docs/testing.md):
//
//	TILEAPI_PG_TILESERV=$HOME/go/bin/pg_tileserv go test -tags pgtileserv -run Tileserv ./loadtest
func TestTileservComparison(t *testing.T) {
	bin := os.Getenv("TILEAPI_PG_TILESERV")
	if bin == "" {
		t.Fatal("TILEAPI_PG_TILESERV is not set: the path of a pg_tileserv binary (see docs/testing.md)")
	}
	ctx := context.Background()
	dbURL, pool := loadedSchema(t)
	tiles, err := PlacesTiles(ctx, pool, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := PrepareView(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	layersFile, err := WriteTableLayer(t.TempDir(), schema)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := StartTileserv(ctx, bin, dbURL, 4, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Stop() })
	plan := Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []Limit{{Name: "second", Window: time.Second, Max: 1 << 40}}}
	mem := startFleet(t, FleetConfig{DatabaseURL: dbURL, Instances: 1, Plan: plan, Keys: 1, LayersFile: layersFile})
	api := Setup{Name: "in process", URL: mem.URLs()[0], Secret: mem.Keys[0].Secret}
	table := api
	table.Name, table.Layer = "table layer", TableLayer
	pgts := Setup{Name: "pg_tileserv", URL: ts.URL, TilePath: TileservPath(schema)}
	for _, s := range []Setup{api, table} {
		check, err := CompareTiles(ctx, s, pgts, tiles[:64])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d tiles, %d places; bytes a tile: %s %.0f, pg_tileserv %.0f", check.Tiles, check.Features, s.Name, check.Bytes[0], check.Bytes[1])
		if len(check.Differ) > 0 || check.Features == 0 {
			t.Errorf("%s and pg_tileserv differ: %s", s.Name, strings.Join(check.Differ, "\n"))
		}
	}
	rep, err := Throughput(ctx, ThroughputConfig{Setups: []Setup{api, pgts}, Clients: 2, Phase: 300 * time.Millisecond,
		MaxRequests: 5000, Tiles: tiles, TableLayer: TableLayer, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var onTileserv []string
	for _, st := range rep.Stats {
		if st.Setup == pgts.Name {
			onTileserv = append(onTileserv, st.Route)
		}
		if st.Errors > 0 || st.Other > 0 || len(st.Latencies) == 0 {
			t.Errorf("%s %s: %d errors, %d other, %d measured", st.Setup, st.Route, st.Errors, st.Other, len(st.Latencies))
		}
	}
	misses := []string{RouteTileMiss, RouteTableMiss}
	if !slices.Equal(onTileserv, misses) {
		t.Errorf("pg_tileserv was measured on %v, want %v only", onTileserv, misses)
	}
	var ratios []string
	for _, x := range rep.Ratios {
		if x.Versus == pgts.Name && x.Setup == api.Name {
			ratios = append(ratios, x.Route)
		}
	}
	if len(rep.Ratios) != 2 || !slices.Equal(ratios, misses) {
		t.Errorf("ratios %+v, want in process over pg_tileserv on %v", rep.Ratios, misses)
	}
}
