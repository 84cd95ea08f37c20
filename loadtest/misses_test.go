package loadtest

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/testenv"
)

// A small run of Misses: with a tile cache whose tiles last a
// millisecond, tileapi renders every tile it is asked for, at z3 whose 38
// tiles repeat within a phase as at z10; each setup is measured on each
// zoom, without compression and with gzip, and the table compares them.
func TestMisses(t *testing.T) {
	ctx := context.Background()
	dbURL, pool := loadedSchema(t)
	plan := Plan{Name: "unlimited", MaxRadius: 10_000, Limits: []Limit{{Name: "second", Window: time.Second, Max: 1 << 40}}}
	env := []string{"TILEAPI_TILE_CACHE_TTL=1ms"}
	red := startFleet(t, FleetConfig{DatabaseURL: dbURL, RedisURL: testenv.RedisURL(t), Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s", Env: env})
	mem := startFleet(t, FleetConfig{DatabaseURL: dbURL, Instances: 1, Plan: plan, Keys: 1, QuotaTimeout: "2s", Env: env})
	setups := []Setup{
		{Name: "redis", URL: red.URLs()[0], Secret: red.Keys[0].Secret},
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
	phases, err := Misses(ctx, MissesConfig{Zooms: zooms, Clients: 2, Phase: 300 * time.Millisecond, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != 2*2*2*2 {
		t.Fatalf("%d phases, want 16 (2 rounds, zooms, encodings and setups)", len(phases))
	}
	for _, p := range phases {
		// A tile written and read back within its millisecond is a hit;
		// two clients walking 38 tiles ask again only long after.
		if p.Requests == 0 || p.Errors > 0 || p.Other > p.Requests/20 || p.Bytes <= 0 {
			t.Errorf("%+v: want misses only, all served", p)
		}
		if p.Zoom == 3 && p.Requests <= 38 {
			t.Errorf("%+v: want the 38 tiles of z3 asked for more than once", p)
		}
	}
	var md strings.Builder
	if err := WriteMissesTable(&md, phases, "in process"); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
	for _, want := range []string{"over in process", "| z3 | identity | redis |", "| z10 | gzip | in process |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if err := WriteMissesTable(&md, phases, "pg_tileserv"); err == nil {
		t.Error("a table against a setup not measured: want an error")
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
