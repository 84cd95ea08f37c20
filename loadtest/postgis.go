package loadtest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/maptile"
	"go.yaml.in/yaml/v3"

	"github.com/tileapi/tileapi/tiles"
)

// placesTilesSQL lists the tiles of zoom $1 that hold a place, from the Web
// Mercator copies of the points (places beyond Mercator's latitude limit
// have an empty one). The world is 2 × 20037508.342789244 m wide.
const placesTilesSQL = `
WITH g AS (SELECT 20037508.342789244 AS half, power(2, $1::int) AS n)
SELECT DISTINCT
    least(floor((ST_X(p.geom_3857) + g.half) / (2 * g.half) * g.n), g.n - 1)::bigint AS x,
    least(floor((g.half - ST_Y(p.geom_3857)) / (2 * g.half) * g.n), g.n - 1)::bigint AS y
FROM places p, g
WHERE NOT ST_IsEmpty(p.geom_3857)
ORDER BY x, y`

// PlacesTiles returns every tile of zoom z that holds a place in the
// database, shuffled by seed: the tiles a run against PostGIS draws from,
// every one of them real work.
func PlacesTiles(ctx context.Context, pool *pgxpool.Pool, z maptile.Zoom, seed uint64) ([]maptile.Tile, error) {
	rows, err := pool.Query(ctx, placesTilesSQL, int(z))
	if err != nil {
		return nil, fmt.Errorf("loadtest: places tiles: %w", err)
	}
	tiles, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (maptile.Tile, error) {
		var x, y int64
		err := row.Scan(&x, &y)
		return maptile.New(uint32(x), uint32(y), z), err
	})
	if err != nil {
		return nil, fmt.Errorf("loadtest: places tiles: %w", err)
	}
	r := rand.New(rand.NewPCG(seed, 0))
	r.Shuffle(len(tiles), func(i, j int) { tiles[i], tiles[j] = tiles[j], tiles[i] })
	return tiles, nil
}

// tableWritesSQL reads the rows inserted and updated in each table of $1
// in the current schema, as PostgreSQL's statistics count them.
const tableWritesSQL = `SELECT relname, n_tup_ins + n_tup_upd FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname = ANY($1)`

// TableWrites returns the rows inserted and updated so far in each of
// tables (pg_stat_user_tables). A server's backends report their counts at
// the end of a transaction at most once a second, and when they exit:
// read them after the servers have stopped.
func TableWrites(ctx context.Context, pool *pgxpool.Pool, tables ...string) (map[string]int64, error) {
	rows, err := pool.Query(ctx, tableWritesSQL, tables)
	if err != nil {
		return nil, fmt.Errorf("loadtest: table writes: %w", err)
	}
	out := map[string]int64{}
	var (
		table string
		n     int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&table, &n}, func() error { out[table] = n; return nil }); err != nil {
		return nil, fmt.Errorf("loadtest: table writes: %w", err)
	}
	return out, nil
}

// placesViewSQL shows the places as a table of their own, with one
// geometry column, to pg_tileserv and to tileapi's table layer alike. The
// table has two geometry columns and pg_tileserv would serve either under
// the same name; tileapi draws geom_3857, through its GiST index, and so
// do pg_tileserv and the table layer through this view. A view has no
// primary key, so pg_tileserv sends the id as a property where tileapi
// makes it the feature id.
// loadtest_places_low shows places_low, the places tileapi draws at zooms
// up to tiles.LowPlacesZoom (migration 00014), in the same way.
const placesViewSQL = `
CREATE OR REPLACE VIEW loadtest_places AS
SELECT id, name, country, admin_code, feature_code, population, geom_3857 AS geom FROM places;
CREATE OR REPLACE VIEW loadtest_places_low AS
SELECT id, name, country, admin_code, feature_code, population, geom_3857 AS geom FROM places_low`

// The views PrepareView creates: over places, and over places_low.
const (
	PlacesView    = "loadtest_places"
	PlacesLowView = "loadtest_places_low"
)

// PrepareView creates (or replaces) the view loadtest_places over places
// and loadtest_places_low over places_low,
// in the first schema of the search path, and returns that schema. Call it
// before pg_tileserv (TileservPath) and the servers of a table layer
// (WriteTableLayer) start: they read their layers then.
func PrepareView(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	if _, err := pool.Exec(ctx, placesViewSQL); err != nil {
		return "", fmt.Errorf("loadtest: places view: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, currentSchemaSQL).Scan(&schema); err != nil {
		return "", fmt.Errorf("loadtest: places view: %w", err)
	}
	return schema, nil
}

// currentSchemaSQL is where CREATE VIEW put an unqualified view.
const currentSchemaSQL = `SELECT current_schema()`

// TileservPath returns the path pg_tileserv serves the tiles of the view
// PrepareView made in schema at, with tileapi's properties, for
// Setup.TilePath. pg_tileserv names a layer schema.view.
func TileservPath(schema string) string { return tileservPath(schema, PlacesView) }

func tileservPath(schema, view string) string {
	return "/" + schema + "." + view + "/{z}/{x}/{y}.pbf?properties=id,name,country,admin_code,feature_code,population"
}

// PrepareTileserv creates the view (PrepareView) and returns the path
// pg_tileserv serves its tiles at (TileservPath).
func PrepareTileserv(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	schema, err := PrepareView(ctx, pool)
	if err != nil {
		return "", err
	}
	return TileservPath(schema), nil
}

// TableLayer is the name of the table layer WriteTableLayer declares.
const TableLayer = "loadtest_places"

// WriteTableLayer writes, in dir, a layers file that declares the view
// PrepareView made in schema as the table layer TableLayer, drawn as the
// bundled places layer is (the same columns, the feature id from id, at
// most 1,000 features a tile, the most populous first, thinned by
// population below zoom 10 as tiles.Layer.MinPopulation thins), and
// returns its path, for FleetConfig.LayersFile.
func WriteTableLayer(dir, schema string) (string, error) {
	places, err := tiles.LookupLayer("places")
	if err != nil {
		return "", fmt.Errorf("loadtest: layers file: %w", err)
	}
	minPopulation := map[int]int64{}
	for z := range places.MaxZoom + 1 {
		minPopulation[z] = places.MinPopulation(z)
	}
	file := map[string]any{"layers": []map[string]any{{
		"name":         TableLayer,
		"table":        pgx.Identifier{schema, PlacesView}.Sanitize(),
		"geometry":     "geom",
		"id":           "id",
		"properties":   slices.Sorted(maps.Keys(places.Fields)),
		"minzoom":      places.MinZoom,
		"maxzoom":      places.MaxZoom,
		"max_features": places.MaxFeatures,
		"filter":       map[string]any{"column": "population", "min_by_zoom": minPopulation},
		"description":  "The bundled places through a view, as any table layer: the load tool's comparison with the places layer and pg_tileserv",
	}}}
	b, err := yaml.Marshal(file)
	if err != nil {
		return "", fmt.Errorf("loadtest: layers file: %w", err)
	}
	path := filepath.Join(dir, "layers.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("loadtest: layers file: %w", err)
	}
	return path, nil
}

// StartTileserv runs the pg_tileserv binary bin on a free loopback port
// against databaseURL with a pool of conns connections, and waits until its
// /health answers. Its output goes to logs. Stop it with Stop.
func StartTileserv(ctx context.Context, bin, databaseURL string, conns int, logs io.Writer) (*Instance, error) {
	if err := CheckLoopback(databaseURL); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(bin)
	cmd.Env = []string{"DATABASE_URL=" + databaseURL, "TS_HTTPHOST=" + host, "TS_HTTPPORT=" + port,
		"TS_DBPOOLMAXCONNS=" + strconv.Itoa(conns), "TS_SHOWPREVIEW=false"}
	return startProcess(ctx, cmd, "http://"+addr, "/health", logs)
}

// TileservVersion returns what bin --version prints: a release build
// names its version, a build from source only its name.
func TileservVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

// TileCheck is what CompareTiles found.
type TileCheck struct {
	Setups   [2]string `json:"setups"`
	Tiles    int       `json:"tiles"`
	Features int       `json:"features"`         // in the first setup's tiles
	Differ   []string  `json:"differ,omitempty"` // the tiles whose features differ, and how
	// Bytes is the mean size of a tile on each setup, uncompressed.
	Bytes [2]float64 `json:"bytes"`
}

// CompareTiles fetches tiles from a and b and checks that each draws the
// same places: the same id, name and population at the same point of the
// tile, whatever the order of the features and however the id is encoded.
func CompareTiles(ctx context.Context, a, b Setup, tiles []maptile.Tile) (*TileCheck, error) {
	hc := newHTTPClient(1)
	check := &TileCheck{Setups: [2]string{a.Name, b.Name}, Tiles: len(tiles)}
	for ti, t := range tiles {
		var got [2][]string
		for i, s := range []Setup{a, b} {
			body, err := get(ctx, hc, s, s.key(ti), s.tilePath(t))
			if err != nil {
				return nil, err
			}
			check.Bytes[i] += float64(len(body)) / float64(len(tiles))
			if got[i], err = places(body); err != nil {
				return nil, fmt.Errorf("loadtest: %s %s: %w", s.Name, s.tilePath(t), err)
			}
		}
		check.Features += len(got[0])
		if !slices.Equal(got[0], got[1]) {
			check.Differ = append(check.Differ, fmt.Sprintf("%d/%d/%d: %s has %d features, %s %d; first difference: %q",
				t.Z, t.X, t.Y, a.Name, len(got[0]), b.Name, len(got[1]), firstDifference(got[0], got[1])))
		}
	}
	return check, nil
}

// get returns the body of a 200 answer to path on s, asked with key. A
// 503 is asked again, as warming the cache does (busyTries).
func get(ctx context.Context, hc *http.Client, s Setup, key, path string) ([]byte, error) {
	for try := 0; ; try++ {
		status, body, err := getOnce(ctx, hc, s, key, path)
		switch {
		case err != nil:
			return nil, err
		case status == http.StatusServiceUnavailable && try < busyTries:
			time.Sleep(busyPause)
		case status != http.StatusOK:
			return nil, fmt.Errorf("loadtest: %s %s: %d: %.200s", s.Name, path, status, body)
		default:
			return body, nil
		}
	}
}

func getOnce(ctx context.Context, hc *http.Client, s Setup, key, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("loadtest: %s: %w", s.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("loadtest: %s %s: %w", s.Name, path, err)
	}
	return resp.StatusCode, body, nil
}

// places decodes an MVT of one layer of points into sorted lines of
// "id name population point"; an empty body is a tile with no features.
func places(tile []byte) ([]string, error) {
	layers, err := mvt.Unmarshal(tile)
	if err != nil {
		return nil, err
	}
	if len(layers) > 1 {
		return nil, fmt.Errorf("%d layers, want one", len(layers))
	}
	var out []string
	for _, l := range layers {
		for _, f := range l.Features {
			out = append(out, fmt.Sprintf("%s %v %s %v", number(featureID(f)), f.Properties["name"], number(f.Properties["population"]), f.Geometry))
		}
	}
	slices.Sort(out)
	return out, nil
}

// featureID is f's id, or else its id property.
func featureID(f *geojson.Feature) any {
	if f.ID != nil {
		return f.ID
	}
	return f.Properties["id"]
}

// number formats an MVT number whatever type it was decoded as.
func number(v any) string {
	switch n := v.(type) {
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(n, 10)
	case uint64:
		return strconv.FormatUint(n, 10)
	}
	return fmt.Sprint(v)
}

func firstDifference(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i] + " / " + b[i]
		}
	}
	if len(a) > len(b) {
		return a[len(b)] + " / none"
	}
	if len(b) > len(a) {
		return "none / " + b[len(a)]
	}
	return ""
}
