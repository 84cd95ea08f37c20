package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/validators/pmtilescheck"
)

// ownTablesSQL makes an operator's own data in the test's schema: shops
// (points, 4326, indexed), districts (polygons in Lambert-93, indexed), a
// table without a spatial index, and a function layer drawing a grid of
// step degrees.
const ownTablesSQL = `
CREATE TABLE shops (id integer PRIMARY KEY, name text NOT NULL, open boolean, geom geometry(Point, 4326) NOT NULL);
CREATE INDEX ON shops USING gist (geom);
INSERT INTO shops VALUES
  (1, 'Rivoli', true, ST_SetSRID(ST_MakePoint(2.3522, 48.8566), 4326)),
  (2, 'Bastille', false, ST_SetSRID(ST_MakePoint(2.3690, 48.8532), 4326)),
  (3, 'Defense', true, ST_SetSRID(ST_MakePoint(2.2380, 48.8920), 4326)),
  (4, 'Lyon', true, ST_SetSRID(ST_MakePoint(4.8357, 45.7640), 4326));
CREATE TABLE districts (gid bigint PRIMARY KEY, label text, geom geometry(MultiPolygon, 2154) NOT NULL);
CREATE INDEX ON districts USING gist (geom);
INSERT INTO districts VALUES
  (10, 'west', ST_Multi(ST_Transform(ST_MakeEnvelope(2.20, 48.80, 2.34, 48.92, 4326), 2154))),
  (11, 'east', ST_Multi(ST_Transform(ST_MakeEnvelope(2.34, 48.80, 2.48, 48.92, 4326), 2154)));
CREATE TABLE unindexed (id integer PRIMARY KEY, geom geometry(Point, 4326));
CREATE FUNCTION grid_tiles(z integer, x integer, y integer, params jsonb) RETURNS bytea
LANGUAGE sql STABLE AS $$
  SELECT ST_AsMVT(g, 'grid', 4096, 'geom') FROM (
    SELECT ST_AsMVTGeom(ST_Transform(ST_SetSRID(ST_MakePoint(lng, lat), 4326), 3857), ST_TileEnvelope(z, x, y)) AS geom,
           (params->>'step')::int AS step
    FROM generate_series(-180, 179, (params->>'step')::int) AS lng,
         generate_series(-80, 80, (params->>'step')::int) AS lat
    WHERE ST_Transform(ST_SetSRID(ST_MakePoint(lng, lat), 4326), 3857) && ST_TileEnvelope(z, x, y)
  ) g
$$;`

// A layers file serves an operator's own tables, a function and a table
// geofence set beside the bundled data, on PostGIS: tiles hold what plain
// PostGIS finds in their envelopes, answers what ST_Contains finds, bad
// parameters are 400s naming them, discovery lists and skips tables, and a
// table layer exports to an archive the reference reader reads.
func TestServeOwnTables(t *testing.T) {
	ctx := context.Background()
	dbURL, pool := ownTablesDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	getenv := func(k string) string { return env[k] }
	layersFile := filepath.Join(t.TempDir(), "layers.yaml")
	if err := os.WriteFile(layersFile, []byte(`layers:
  - name: shops
    table: shops
    properties: [name, open]
    attribution: "© Example Shops"
  - name: grid
    function: grid_tiles
    maxzoom: 6
    params:
      - {name: step, type: integer, min: 5, max: 60, default: 30}
geofences:
  - name: districts
    table: districts
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env["TILEAPI_LAYERS_FILE"] = layersFile
	env["TILEAPI_DISCOVER"] = "true"
	secret := createKey(t, getenv, "pro")
	in := startServe(t, env)

	// A tile of shops: the ids plain PostGIS finds in its envelope.
	for _, tl := range []maptile.Tile{maptile.At([2]float64{2.35, 48.85}, 12), maptile.At([2]float64{2.35, 48.85}, 6), maptile.New(0, 0, 0)} {
		resp, body := get(t, in.url+tilePath("shops", tl), secret)
		if resp.StatusCode != 200 {
			t.Fatalf("shops %v: %d %s", tl, resp.StatusCode, body)
		}
		var want []uint64
		rows, err := pool.Query(ctx, `SELECT id FROM shops WHERE ST_Intersects(ST_Transform(geom, 3857), ST_TileEnvelope($1, $2, $3, margin => 256.0/4096)) ORDER BY id`, int(tl.Z), int(tl.X), int(tl.Y))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id uint64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		rows.Close()
		var got []uint64
		if len(body) > 0 {
			layers, err := mvt.Unmarshal(body)
			if err != nil || len(layers) != 1 || layers[0].Name != "shops" {
				t.Fatalf("shops %v: %v %v", tl, layers, err)
			}
			for _, f := range layers[0].Features {
				id, _ := f.ID.(float64)
				got = append(got, uint64(id))
				if _, ok := f.Properties["geom"]; ok || f.Properties["name"] == nil {
					t.Errorf("shops %v: feature %v has properties %v", tl, f.ID, f.Properties)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("shops %v: ids %v, PostGIS finds %v", tl, got, want)
		}
	}

	// The function layer: its parameter parsed and checked, part of the cache key.
	for _, tc := range []struct {
		query  string
		status int
		points int // at zoom 0
	}{
		{"", 200, 12 * 6},        // the default, 30 degrees: 12 x 6 points
		{"?step=60", 200, 6 * 3}, // a miss of its own, not the cached default tile
		{"?step=4", 400, 0},
		{"?step=ten", 400, 0},
		{"?step=0x1E", 400, 0}, // strconv.ParseFloat's 30, not JSON's
		{"?step=%2B30", 400, 0},
		{"?step=30&step=60", 400, 0},
	} {
		resp, body := get(t, in.url+"/v1/tiles/grid/0/0/0.mvt"+tc.query, secret)
		if resp.StatusCode != tc.status {
			t.Errorf("grid%s: %d %s", tc.query, resp.StatusCode, body)
			continue
		}
		if tc.status != 200 {
			if !strings.Contains(string(body), `"field":"step"`) || !strings.Contains(string(body), `"detail":"invalid step: `) ||
				resp.Header.Get("X-RateLimit-Cost") != "" {
				t.Errorf("grid%s: %s, cost %q", tc.query, body, resp.Header.Get("X-RateLimit-Cost"))
			}
			continue
		}
		layers, err := mvt.Unmarshal(body)
		if err != nil || len(layers) != 1 || len(layers[0].Features) != tc.points {
			t.Errorf("grid%s: %d features, want %d (%v)", tc.query, len(layers[0].Features), tc.points, err)
		}
	}

	// The table geofence set: what ST_Contains finds on the table.
	for _, pt := range [][2]float64{{2.30, 48.86}, {2.40, 48.86}, {2.0, 48.0}} {
		var want []int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(gid ORDER BY gid), '{}') FROM districts
			WHERE ST_Contains(geom, ST_Transform(ST_SetSRID(ST_MakePoint($1, $2), 4326), 2154))`, pt[0], pt[1]).Scan(&want); err != nil {
			t.Fatal(err)
		}
		resp, body := get(t, in.url+"/v1/geofence/districts/contains?lng="+jsonNumber(pt[0])+"&lat="+jsonNumber(pt[1]), secret)
		var fc struct {
			Features []struct {
				ID int64 `json:"id"`
			} `json:"features"`
		}
		if err := json.Unmarshal(body, &fc); err != nil || resp.StatusCode != 200 {
			t.Fatalf("districts contains %v: %d %s", pt, resp.StatusCode, body)
		}
		got := []int64{}
		for _, f := range fc.Features {
			got = append(got, f.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("districts contains %v: %v, ST_Contains finds %v", pt, got, want)
		}
	}

	// tileapi layers: the file's layers, what discovery publishes and skips.
	var out bytes.Buffer
	if err := run(ctx, []string{"tileapi", "layers"}, getenv, &out, &out); err != nil {
		t.Fatalf("layers: %v\n%s", err, &out)
	}
	schema := schemaOf(t, dbURL)
	for _, want := range []string{"shops  ", "grid  ", "districts  ", schema + "_shops", schema + "_districts",
		"skipped " + schema + ".unindexed: no spatial index"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tileapi layers lacks %q:\n%s", want, &out)
		}
	}

	// Exported to an archive: the tiles serve draws, as the reference reader reads them.
	archive := filepath.Join(t.TempDir(), "shops.pmtiles")
	out.Reset()
	if err := run(ctx, []string{"tileapi", "export", "-layer", "shops", "-zoom", "4-10", "-o", archive, "-quiet"}, getenv, &out, &out); err != nil {
		t.Fatalf("export: %v\n%s", err, &out)
	}
	var tiles [][3]uint32
	for z := 4; z <= 10; z++ {
		for _, p := range [][2]float64{{2.35, 48.85}, {4.8357, 45.7640}} {
			tl := maptile.At(p, maptile.Zoom(z))
			tiles = append(tiles, [3]uint32{uint32(z), tl.X, tl.Y})
		}
	}
	report := pmtilescheck.Check(t, archive, tiles)
	for i, tl := range tiles {
		_, body := get(t, in.url+tilePath("shops", maptile.New(tl[1], tl[2], maptile.Zoom(tl[0]))), secret)
		sum := sha256.Sum256(body)
		if report.Tiles[i].SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("tile %v: the archive's differs from the served one (%d bytes)", tl, len(body))
		}
	}
}

// Bad configuration stops serve before it listens, naming the layer or
// plan and what is wrong.
func TestServeOwnTablesBadConfig(t *testing.T) {
	ctx := context.Background()
	dbURL, _ := ownTablesDatabase(t)
	dir := t.TempDir()
	plans := filepath.Join(dir, "plans.json")
	if err := os.WriteFile(plans, []byte(`{"plans": [{"name": "gold", "max_radius_m": 1000,
		"limits": [{"name": "m", "max": 100, "window": "1m"}],
		"cost": {"radius_unit_m": 1000, "hit_divisor": 2, "flat": 1, "tiles": {"shopz": {"ref_zoom": 10, "max": 8}}}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, layers, plans, want string
	}{
		{"no such table", "layers: [{name: stores, table: nosuch}]", "", `layer "stores": table "nosuch": no such table or view`},
		{"no such column", "layers: [{name: stores, table: shops, properties: [nme]}]", "", `"nme": no such column`},
		{"not a geometry", "layers: [{name: stores, table: shops, geometry: name}]", "", `layer "stores"`},
		{"a name twice", "layers: [{name: a, table: shops}, {name: a, table: districts}]", "", `layer "a": the name is used twice`},
		{"a bundled name", "layers: [{name: places, table: shops}]", "", `layer "places": the name is used twice`},
		{"inverted zooms", "layers: [{name: a, table: shops, minzoom: 8, maxzoom: 2}]", "", `layer "a": the zoom range is inverted`},
		{"no such function", "layers: [{name: f, function: nosuch_tiles}]", "", `layer "f": function "nosuch_tiles": no such function`},
		{"no such id column", "geofences: [{name: s, table: shops, id: nosuch}]", "", `set "s"`},
		{"a plan prices a layer that is not", "layers: [{name: shops, table: shops}]", plans, `plan "gold" prices tiles of layer "shopz", which does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "layers.yaml")
			if err := os.WriteFile(file, []byte(tc.layers+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			e := map[string]string{"DATABASE_URL": dbURL, "TILEAPI_LAYERS_FILE": file, "TILEAPI_PLANS_FILE": tc.plans}
			var out bytes.Buffer
			err := run(ctx, []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", "none"}, func(k string) string { return e[k] }, &out, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve: %v, want an error with %q", err, tc.want)
			}
		})
	}
	// Without a database, a table layer says what it needs.
	file := filepath.Join(dir, "layers.yaml")
	if err := os.WriteFile(file, []byte("layers: [{name: stores, table: shops}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(ctx, []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", "none"},
		func(k string) string { return map[string]string{"TILEAPI_LAYERS_FILE": file}[k] }, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `layer "stores": a table layer needs a database: set DATABASE_URL`) {
		t.Errorf("a table layer without a database: %v", err)
	}
}

// ownTablesDatabase returns a database of the test's own, migrated, loaded
// with Paris and holding ownTablesSQL's tables, and a pool on it (closed
// when t ends).
func ownTablesDatabase(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	getenv := func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] }
	migrate(t, getenv)
	loadParis(t, getenv)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, ownTablesSQL); err != nil {
		t.Fatal(err)
	}
	return dbURL, pool
}

// schemaOf is the first schema of a database URL's search_path.
func schemaOf(t *testing.T, dbURL string) string {
	t.Helper()
	_, rest, _ := strings.Cut(dbURL, "search_path=")
	schema, _, _ := strings.Cut(rest, "%2C")
	if schema == "" {
		t.Fatalf("no search_path in %s", dbURL)
	}
	return schema
}

func jsonNumber(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}
