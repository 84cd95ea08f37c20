package pglayers

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/validators/mvtcheck"
	"github.com/tileapi/tileapi/internal/validators/mvtdecode"
	"github.com/tileapi/tileapi/tiles"
)

// margin is the tile's margin as ST_TileEnvelope takes it; inner is the
// tile with a margin 8 tile units narrower, which every line or polygon
// reaching into it has enough of inside the margin not to vanish.
const (
	margin = float64(tiles.Buffer) / tiles.Extent
	inner  = float64(tiles.Buffer-8) / tiles.Extent
)

// reference finds, with plain PostGIS, what a tile of a table should hold.
type reference struct {
	table string // quoted
	id    string // the id column, quoted
	// geom is the geometry to transform to Web Mercator: the column, or
	// the column clipped to Mercator's latitudes where it reaches the
	// poles.
	geom  string
	where string // more conditions, or ""
	// exactFrom is the lowest zoom at which no line or polygon is so
	// small that simplification makes it vanish; below it a tile holds a
	// subset of what the reference finds.
	exactFrom int
	points    bool // a tile holds exactly what the reference finds
}

// ids returns the ids of the rows whose geometry intersects tile t with
// margin m.
func (r reference) ids(t *testing.T, pool *pgxpool.Pool, tile maptile.Tile, m float64) []uint64 {
	t.Helper()
	return query(t, pool, fmt.Sprintf(`SELECT %s FROM %s WHERE ST_Intersects(ST_Transform(%s, 3857), ST_TileEnvelope($1, $2, $3, margin => $4))%s`,
		r.id, r.table, r.geom, r.where), tile, m)
}

// query returns the sorted ids sql finds for tile t with margin m ($1 z,
// $2 x, $3 y, $4 m).
func query(t *testing.T, pool *pgxpool.Pool, sql string, tile maptile.Tile, m float64) []uint64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, int(tile.Z), int(tile.X), int(tile.Y), m)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	slices.Sort(out)
	return out
}

// decode returns the features of layer name in tile b, decoded by orb, in
// tile coordinates.
func decode(t *testing.T, b []byte, name string) []*geojson.Feature {
	t.Helper()
	ls, err := mvt.Unmarshal(b)
	if err != nil {
		t.Fatalf("%v in %d bytes", err, len(b))
	}
	var fs []*geojson.Feature
	for _, l := range ls {
		if l.Name != name {
			t.Errorf("a layer %q in a tile of %q", l.Name, name)
			continue
		}
		if l.Extent != tiles.Extent {
			t.Errorf("extent %d", l.Extent)
		}
		fs = append(fs, l.Features...)
	}
	return fs
}

// featureIDs returns the sorted ids of fs, failing t for one without.
func featureIDs(t *testing.T, fs []*geojson.Feature) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, len(fs))
	for _, f := range fs {
		id, ok := f.ID.(float64)
		if !ok {
			t.Errorf("a feature without an id: %v", f.Properties)
			continue
		}
		ids = append(ids, uint64(id))
	}
	slices.Sort(ids)
	return ids
}

// sample returns the tiles to check at zooms: every tile of zooms 0 to 2,
// and at the others the tiles of some rows of the table and their
// neighbours east and south.
func sample(t *testing.T, pool *pgxpool.Pool, r reference, zooms []int) []maptile.Tile {
	t.Helper()
	var ts []maptile.Tile
	for z := range 3 {
		n := uint32(1) << z
		for x := range n {
			for y := range n {
				ts = append(ts, maptile.New(x, y, maptile.Zoom(z)))
			}
		}
	}
	sql := fmt.Sprintf(`SELECT ST_X(c), ST_Y(c) FROM (
		SELECT ST_Transform(ST_PointOnSurface(%s), 4326) AS c FROM %s ORDER BY %s LIMIT 3) p`, r.geom, r.table, r.id)
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	points, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (orb.Point, error) {
		var p orb.Point
		err := row.Scan(&p[0], &p[1])
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range zooms {
		for _, p := range points {
			c := maptile.At(p, maptile.Zoom(z))
			n := uint32(1) << z
			ts = append(ts, c, maptile.New((c.X+1)%n, c.Y, c.Z), maptile.New(c.X, min(c.Y+1, n-1), c.Z))
		}
	}
	return ts
}

// render draws tiles ts of l, failing t on any error.
func render(t *testing.T, l tiles.Layer, ts []maptile.Tile, params tiles.Params) map[maptile.Tile][]byte {
	t.Helper()
	out := make(map[maptile.Tile][]byte, len(ts))
	for _, tile := range ts {
		b, err := l.Tile(context.Background(), tile, params)
		if err != nil {
			t.Fatalf("%v: %v", tile, err)
		}
		out[tile] = b
	}
	return out
}

func tileName(tile maptile.Tile) string { return fmt.Sprintf("%d-%d-%d.mvt", tile.Z, tile.X, tile.Y) }

// check compares the features of the tiles of l with the reference, and
// the ids orb decodes with those @mapbox/vector-tile does; it returns the
// number of features seen.
func check(t *testing.T, pool *pgxpool.Pool, l tiles.Layer, r reference, drawn map[maptile.Tile][]byte) int {
	t.Helper()
	named := make(map[string][]byte, len(drawn))
	for tile, b := range drawn {
		named[tileName(tile)] = b
	}
	npm := mvtdecode.Decode(t, named)
	total := 0
	for tile, b := range drawn {
		got := featureIDs(t, decode(t, b, l.Name))
		total += len(got)
		want := r.ids(t, pool, tile, margin)
		switch {
		case r.points:
			if !slices.Equal(got, want) {
				t.Errorf("%v: ids %v, want %v", tile, got, want)
			}
		case int(tile.Z) < r.exactFrom:
			if extra := minus(got, want); len(extra) > 0 {
				t.Errorf("%v: ids %v not in the tile", tile, extra)
			}
		default:
			if extra := minus(got, want); len(extra) > 0 {
				t.Errorf("%v: ids %v not in the tile", tile, extra)
			}
			if missing := minus(r.ids(t, pool, tile, inner), got); len(missing) > 0 {
				t.Errorf("%v: ids %v missing", tile, missing)
			}
		}
		var npmIDs []uint64
		for _, f := range npm[tileName(tile)][l.Name].Features {
			if f.ID != nil {
				npmIDs = append(npmIDs, *f.ID)
			}
		}
		slices.Sort(npmIDs)
		if !slices.Equal(npmIDs, got) {
			t.Errorf("%v: @mapbox/vector-tile decodes ids %v, orb %v", tile, npmIDs, got)
		}
	}
	return total
}

// minus returns the elements of a not in b, both sorted.
func minus(a, b []uint64) []uint64 {
	var out []uint64
	for _, v := range a {
		if _, found := slices.BinarySearch(b, v); !found {
			out = append(out, v)
		}
	}
	return out
}

// The tiles of table layers of points, lines and polygons, in SRIDs 4326,
// 3857, 2154 and 32633, of a view and of a table named by a reserved
// word, hold what plain PostGIS finds in the tile plus its margin; no tile
// of the world at zooms 0 to 2 fails, whatever the SRID's domain.
func TestTilesMatchPostGIS(t *testing.T) {
	owner, _ := db(t)
	zooms := []int{4, 8, 13}
	for _, tc := range []struct {
		name string
		cfg  layers.Layer
		ref  reference
		min  int // features over all tiles, at least
	}{
		{name: "points 4326", cfg: layers.Layer{Table: "test_pglayers.pts4326", MaxFeatures: 50000},
			ref: reference{table: "test_pglayers.pts4326", id: "id", geom: "geom", where: " AND abs(ST_Y(geom)) < 85.06", points: true}, min: 20000},
		{name: "lines 3857", cfg: layers.Layer{Table: "test_pglayers.lines3857", MaxFeatures: 50000},
			ref: reference{table: "test_pglayers.lines3857", id: "gid", geom: "geom"}, min: 3000},
		{name: "polygons 2154", cfg: layers.Layer{Table: "test_pglayers.polys2154", MaxFeatures: 50000},
			ref: reference{table: "test_pglayers.polys2154", id: "id", geom: "geom", exactFrom: 3}, min: 3000},
		{name: "multipolygons 32633", cfg: layers.Layer{Table: "test_pglayers.polys32633", MaxFeatures: 50000},
			ref: reference{table: "test_pglayers.polys32633", id: "id", geom: "geom", exactFrom: 3}, min: 3000},
		{name: "shapes at the poles 4326", cfg: layers.Layer{Table: "test_pglayers.polar4326"},
			ref: reference{table: "test_pglayers.polar4326", id: "id",
				geom: fmt.Sprintf("ST_ClipByBox2D(geom, ST_MakeEnvelope(-180, %[1]v, 180, %[2]v, 4326))", -maxLat, maxLat)}, min: 4},
		{name: "view", cfg: layers.Layer{Table: "test_pglayers.v_big", ID: "id", MaxFeatures: 50000},
			ref: reference{table: "test_pglayers.v_big", id: "id", geom: "geom", where: " AND abs(ST_Y(geom)) < 85.06", points: true}, min: 10000},
		{name: "reserved word", cfg: layers.Layer{Table: "test_pglayers.order"},
			ref: reference{table: `test_pglayers."order"`, id: "id", geom: "geom", points: true}, min: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = strings.ReplaceAll(tc.name, " ", "-")
			l, _, err := Open(context.Background(), owner, timeout, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			drawn := render(t, l, sample(t, owner, tc.ref, zooms), tiles.Params{})
			if n := check(t, owner, l, tc.ref, drawn); n < tc.min {
				t.Errorf("%d features in %d tiles, want at least %d", n, len(drawn), tc.min)
			}
			if tc.ref.points {
				return
			}
			var mt []mvtcheck.Tile
			for tile, b := range drawn {
				mt = append(mt, mvtcheck.Tile{Name: tileName(tile), Data: b})
			}
			if rep := mvtcheck.Check(t, mt); len(rep.Defects) > 0 {
				t.Errorf("%d defects in %d rings, the first: %v", len(rep.Defects), rep.Rings, rep.Defects[0])
			}
		})
	}
}

// Every tile of a projected layer at zooms 0 to 3 renders, and those far
// from its data are empty: the envelope is clipped to the SRID's domain
// before it is transformed (the UTM zone's refuses the Pacific).
func TestProjectedWorld(t *testing.T) {
	owner, _ := db(t)
	for _, table := range []string{"polys32633", "polys2154"} {
		l, _, err := Open(context.Background(), owner, timeout, layers.Layer{Name: table, Table: "test_pglayers." + table})
		if err != nil {
			t.Fatal(err)
		}
		var ts []maptile.Tile
		for z := range 4 {
			n := uint32(1) << z
			for x := range n {
				for y := range n {
					ts = append(ts, maptile.New(x, y, maptile.Zoom(z)))
				}
			}
		}
		nonEmpty := 0
		for tile, b := range render(t, l, ts, tiles.Params{}) {
			if len(b) > 0 {
				nonEmpty++
			}
			if tile.Z == 3 && (tile.X < 3 || tile.X > 4) && len(b) > 0 {
				t.Errorf("%s %v: %d bytes far from Europe", table, tile, len(b))
			}
		}
		if nonEmpty < 4 {
			t.Errorf("%s: %d tiles of 85 have features", table, nonEmpty)
		}
	}
}

// Properties are the row's values, of the types they have in the table
// (numeric as a double, json and arrays as text, a NULL left out), read
// alike by orb and @mapbox/vector-tile; a point is where the row's
// coordinate falls in the tile, within a unit.
func TestPropertiesAndPoints(t *testing.T) {
	owner, _ := db(t)
	ctx := context.Background()
	l, _, err := Open(ctx, owner, timeout, layers.Layer{Name: "pts", Table: "test_pglayers.pts4326"})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		props map[string]any
		x, y  float64 // Web Mercator
	}
	rows, err := owner.Query(ctx, `
		SELECT id, name, pop, score, flag, tags::text, meta::text, amount::float8, "Upper Name",
		       ST_X(ST_Transform(geom, 3857)), ST_Y(ST_Transform(geom, 3857))
		FROM test_pglayers.pts4326 WHERE abs(ST_Y(geom)) < 85.06`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]row{}
	names := []string{"name", "pop", "score", "flag", "tags", "meta", "amount", "Upper Name"}
	for rows.Next() {
		vs, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		r := row{props: map[string]any{}, x: vs[9].(float64), y: vs[10].(float64)}
		for i, n := range names {
			if vs[i+1] != nil {
				r.props[n] = normal(vs[i+1])
			}
		}
		want[uint64(vs[0].(int64))] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	ts := []maptile.Tile{maptile.New(0, 0, 0), maptile.New(1, 1, 1), maptile.New(9, 5, 4), maptile.New(70, 40, 7)}
	drawn := render(t, l, ts, tiles.Params{})
	named := map[string][]byte{}
	for tile, b := range drawn {
		named[tileName(tile)] = b
	}
	npm := mvtdecode.Decode(t, named)
	seen := 0
	for tile, b := range drawn {
		size := mercatorWorld / math.Exp2(float64(tile.Z))
		west, north := -mercatorWorld/2+float64(tile.X)*size, mercatorWorld/2-float64(tile.Y)*size
		byID := map[uint64]mvtdecode.Feature{}
		for _, f := range npm[tileName(tile)]["pts"].Features {
			byID[*f.ID] = f
		}
		for _, f := range decode(t, b, "pts") {
			id := uint64(f.ID.(float64))
			w, ok := want[id]
			if !ok {
				t.Fatalf("%v: feature %d is no row", tile, id)
			}
			seen++
			got := map[string]any{}
			for k, v := range f.Properties {
				got[k] = normal(v)
			}
			if !equalProps(got, w.props) {
				t.Errorf("%v: feature %d: properties %v, want %v", tile, id, got, w.props)
			}
			nf := byID[id]
			if npmProps := normalAll(nf.Properties); !equalProps(npmProps, w.props) {
				t.Errorf("%v: feature %d: @mapbox/vector-tile reads properties %v, want %v", tile, id, npmProps, w.props)
			}
			p := f.Geometry.(orb.Point)
			wx, wy := (w.x-west)/size*tiles.Extent, (north-w.y)/size*tiles.Extent
			if math.Abs(p[0]-wx) > 1 || math.Abs(p[1]-wy) > 1 {
				t.Errorf("%v: feature %d at %v, want (%.1f, %.1f)", tile, id, p, wx, wy)
			}
			if nf.Type != 1 || len(nf.Geometry) != 1 || nf.Geometry[0][0] != [2]float64(p) {
				t.Errorf("%v: feature %d: @mapbox/vector-tile reads %d %v, orb %v", tile, id, nf.Type, nf.Geometry, p)
			}
		}
	}
	if seen < 10000 {
		t.Errorf("%d features checked", seen)
	}
}

// normal makes numbers float64, so that values read from the database and
// decoded from a tile compare.
func normal(v any) any {
	switch n := v.(type) {
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case uint64:
		return float64(n)
	case float32:
		return float64(n)
	}
	return v
}

func normalAll(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = normal(v)
	}
	return out
}

// equalProps compares properties, floats to within a part in 10^12.
func equalProps(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		x, xok := v.(float64)
		y, yok := w.(float64)
		if xok && yok {
			if math.Abs(x-y) > 1e-12*math.Max(1, math.Abs(y)) {
				return false
			}
		} else if v != w {
			return false
		}
	}
	return true
}

// The filter keeps the rows at or above the zoom's threshold, largest
// first, and the cap keeps the first rows in that order (or by id);
// a float column's threshold is not rounded.
func TestFilterAndCap(t *testing.T) {
	owner, _ := db(t)
	ctx := context.Background()
	pop := &layers.Filter{Column: "pop", MinByZoom: map[int]float64{0: 9_000_000.5, 3: 5_000_000, 6: 0}}
	// ref finds the first limit rows in order of those in the tile that
	// meet cond.
	const ref = `SELECT id FROM (
		SELECT id FROM test_pglayers.pts4326
		WHERE ST_Intersects(ST_Transform(geom, 3857), ST_TileEnvelope($1, $2, $3, margin => $4))
		  AND abs(ST_Y(geom)) < 85.06 AND %s
		ORDER BY %s LIMIT %d) q`
	for _, tc := range []struct {
		name        string
		cfg         layers.Layer
		tile        maptile.Tile
		cond, order string
		limit       int
	}{
		{name: "cap by id", cfg: layers.Layer{Table: "test_pglayers.pts4326", MaxFeatures: 25},
			tile: maptile.New(0, 0, 0), cond: "true", order: "id", limit: 25},
		{name: "filter at zoom 0", cfg: layers.Layer{Table: "test_pglayers.pts4326", Filter: pop},
			tile: maptile.New(0, 0, 0), cond: "pop >= 9000001", order: "id", limit: 100000},
		{name: "filter at zoom 4", cfg: layers.Layer{Table: "test_pglayers.pts4326", Filter: pop},
			tile: maptile.New(9, 5, 4), cond: "pop >= 5000000", order: "id", limit: 100000},
		{name: "filter at zoom 7", cfg: layers.Layer{Table: "test_pglayers.pts4326", Filter: pop},
			tile: maptile.New(70, 40, 7), cond: "pop >= 0", order: "id", limit: 100000},
		{name: "filter and cap", cfg: layers.Layer{Table: "test_pglayers.pts4326", Filter: pop, MaxFeatures: 30},
			tile: maptile.New(0, 0, 0), cond: "pop >= 9000001", order: "pop DESC, id", limit: 30},
		{name: "float filter", cfg: layers.Layer{Table: "test_pglayers.pts4326",
			Filter: &layers.Filter{Column: "score", MinByZoom: map[int]float64{0: 0.75}}},
			tile: maptile.New(1, 0, 1), cond: "score >= 0.75", order: "id", limit: 100000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "pts"
			l, _, err := Open(ctx, owner, timeout, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := l.Tile(ctx, tc.tile, tiles.Params{})
			if err != nil {
				t.Fatal(err)
			}
			got := featureIDs(t, decode(t, b, "pts"))
			want := query(t, owner, fmt.Sprintf(ref, tc.cond, tc.order, tc.limit), tc.tile, margin)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("ids %v (%d), want %v (%d)", head(got), len(got), head(want), len(want))
			}
		})
	}
}

func head(ids []uint64) []uint64 { return ids[:min(len(ids), 10)] }

// A row whose id is negative is drawn without an id.
func TestNegativeIDs(t *testing.T) {
	owner, _ := db(t)
	ctx := context.Background()
	l, _, err := Open(ctx, owner, timeout, layers.Layer{Name: "neg", Table: "test_pglayers.negids"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Tile(ctx, maptile.New(0, 0, 0), tiles.Params{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []any
	for _, f := range decode(t, b, "neg") {
		ids = append(ids, f.ID)
	}
	if want := []any{nil, nil, 0.0, 3.0}; !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
}

// The tile query finds its rows through the table's own spatial index,
// on the stored SRID, for every SRID and for a view.
func TestUsesIndex(t *testing.T) {
	owner, _ := db(t)
	for _, tc := range []struct {
		table, id, index string
		tile             maptile.Tile
	}{
		{"pts4326", "", "pts4326_geom_idx", maptile.New(70, 40, 7)},
		{"v_big", "id", "pts4326_geom_idx", maptile.New(70, 40, 7)},
		{"lines3857", "", "lines3857_geom_idx", maptile.New(70, 40, 7)},
		{"polys2154", "", "polys2154_geom_idx", maptile.At(orb.Point{2.35, 48.85}, 8)},
		{"polys32633", "", "polys32633_geom_idx", maptile.At(orb.Point{15, 50}, 8)},
	} {
		t.Run(tc.table, func(t *testing.T) {
			l, _, err := Open(context.Background(), owner, timeout, layers.Layer{Name: "x", Table: "test_pglayers." + tc.table, ID: tc.id})
			if err != nil {
				t.Fatal(err)
			}
			s := l.Source.(*tableSource)
			args := make([]any, len(s.slots))
			for i, sl := range s.slots {
				args[i], _ = s.value(sl, tc.tile)
			}
			spatialtest.UsesIndex(t, owner, tc.index, s.sql, args...)
		})
	}
}

// A function layer is called with the tile and the request's parameters
// as params; a NULL is an empty tile.
func TestFunctionLayer(t *testing.T) {
	owner, readerPool := db(t)
	ctx := context.Background()
	lo, hi := 1.0, 16.0
	params := []layers.Param{
		{Name: "n", Type: layers.Integer, Default: 4, Min: &lo, Max: &hi},
		{Name: "every", Type: layers.Integer, Default: 1, Min: &lo},
	}
	// The reader may call it too: EXECUTE is PUBLIC's by default.
	for _, pool := range []*pgxpool.Pool{owner, readerPool} {
		l, warnings, err := Open(ctx, pool, timeout, layers.Layer{Name: "grid", Function: "test_pglayers.grid", Params: params, MaxZoom: zoom(12)})
		if err != nil {
			t.Fatal(err)
		}
		if len(warnings) != 0 || l.Description != "A grid of points" || l.MaxZoom != 12 || !slices.EqualFunc(l.Params, params, func(a, b layers.Param) bool { return a.Name == b.Name }) {
			t.Errorf("layer %+v, warnings %v", l, warnings)
		}
		for _, tc := range []struct {
			query url.Values
			ids   []uint64
		}{
			{url.Values{}, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
			{url.Values{"n": {"3"}, "every": {"2"}}, []uint64{0, 2, 4, 6, 8}},
			{url.Values{"n": {"2"}}, []uint64{0, 1, 2, 3}},
		} {
			p, err := l.ParseParams(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			tile := maptile.New(2, 3, 3)
			b, err := l.Tile(ctx, tile, p)
			if err != nil {
				t.Fatal(err)
			}
			fs := decode(t, b, "grid")
			if got := featureIDs(t, fs); !slices.Equal(got, tc.ids) {
				t.Errorf("%v: ids %v, want %v", tc.query, got, tc.ids)
			}
			for _, f := range fs {
				if f.Properties["zoom"] != 3.0 && f.Properties["zoom"] != int64(3) && f.Properties["zoom"] != uint64(3) {
					t.Errorf("%v: zoom %v (%T)", tc.query, f.Properties["zoom"], f.Properties["zoom"])
				}
			}
		}
	}
	l, _, err := Open(ctx, owner, timeout, layers.Layer{Name: "nothing", Function: "test_pglayers.nothing"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Tile(ctx, maptile.New(0, 0, 0), tiles.Params{})
	if err != nil || b == nil || len(b) != 0 {
		t.Errorf("a NULL tile: %v, %v", b, err)
	}
}

// Names with quotes and semicolons are either served as the names they
// are or are no such table or column: never run as SQL.
func TestInjection(t *testing.T) {
	owner, _ := db(t)
	ctx := context.Background()
	const table = `test_pglayers."x""; DROP TABLE test_pglayers.pts4326; --"`
	l, _, err := Open(ctx, owner, timeout, layers.Layer{Name: "quoted", Table: table})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Tile(ctx, maptile.New(0, 0, 0), tiles.Params{})
	if err != nil {
		t.Fatal(err)
	}
	fs := decode(t, b, "quoted")
	if len(fs) != 1 || fs[0].Properties[`a"b; --`] != "quoted" || fs[0].ID != 1.0 {
		t.Errorf("features %v", fs)
	}
	for _, cfg := range []layers.Layer{
		{Table: `test_pglayers.pts4326"; DROP TABLE test_pglayers.pts4326; --`},
		{Table: `test_pglayers."pts4326; DROP TABLE test_pglayers.pts4326"`},
		{Table: table, Geometry: `geom"; DROP TABLE test_pglayers.pts4326; --`},
		{Table: table, ID: `id" FROM x; DROP TABLE test_pglayers.pts4326; --`},
		{Table: table, Properties: []string{`a"b; --`, `'); DROP TABLE test_pglayers.pts4326; --`}},
		{Table: table, Filter: &layers.Filter{Column: `id >= 0; DROP TABLE test_pglayers.pts4326; --`, MinByZoom: map[int]float64{0: 0}}},
	} {
		cfg.Name = "inj"
		_, _, err := Open(ctx, owner, timeout, cfg)
		if err == nil || !strings.Contains(err.Error(), `layer "inj"`) ||
			!strings.Contains(err.Error(), "no such table") && !strings.Contains(err.Error(), "no such column") {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	if !exists(t, owner, "test_pglayers.pts4326") {
		t.Error("a name was run as SQL: pts4326 is gone")
	}
}
