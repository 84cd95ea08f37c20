package pglayers

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/layers"
)

func zoom(z int) *int { return &z }

// Every configuration Open cannot serve is an error naming the layer and
// what is wrong.
func TestOpenErrors(t *testing.T) {
	owner, readerPool := db(t)
	for _, tc := range []struct {
		name   string
		cfg    layers.Layer
		reader bool // open as the reader
		want   []string
	}{
		{name: "no such table", cfg: layers.Layer{Table: "test_pglayers.nosuch"},
			want: []string{`table "test_pglayers.nosuch": no such table or view`}},
		{name: "no such schema", cfg: layers.Layer{Table: "nosuch.pts4326"},
			want: []string{`no such table or view`}},
		{name: "mixed case unquoted", cfg: layers.Layer{Table: "test_pglayers.Dup2"},
			want: []string{`no such table or view`, `quoted`}},
		{name: "not a name", cfg: layers.Layer{Table: "test_pglayers.pts4326; DROP TABLE test_pglayers.pts4326"},
			want: []string{`no such table or view`, `invalid name syntax`}},
		{name: "an index", cfg: layers.Layer{Table: "test_pglayers.pts4326_pkey"},
			want: []string{`test_pglayers.pts4326_pkey is not a table or view`}},
		{name: "no privilege", cfg: layers.Layer{Table: "test_pglayers.secret"}, reader: true,
			want: []string{`no privilege`, `"test_pglayers_reader" may not SELECT from test_pglayers.secret`, `GRANT SELECT ON test_pglayers.secret`}},
		{name: "no privilege on the schema", cfg: layers.Layer{Table: "test_pglayers_hidden.t"}, reader: true,
			want: []string{`no privilege`, `permission denied for schema test_pglayers_hidden`, `GRANT USAGE ON SCHEMA`}},
		{name: "no privilege on a column", cfg: layers.Layer{Table: "test_pglayers.twogeoms", Geometry: "b"}, reader: true,
			want: []string{`geometry "b": no privilege`, `may not SELECT column "b" of test_pglayers.twogeoms`}},
		{name: "no such geometry column", cfg: layers.Layer{Table: "test_pglayers.pts4326", Geometry: "nosuch"},
			want: []string{`geometry "nosuch": no such column in table test_pglayers.pts4326`}},
		{name: "geometry column in the wrong case", cfg: layers.Layer{Table: "test_pglayers.pts4326", Geometry: "GEOM"},
			want: []string{`geometry "GEOM": no such column`, `did you mean "geom"?`}},
		{name: "not a geometry", cfg: layers.Layer{Table: "test_pglayers.pts4326", Geometry: "name"},
			want: []string{`geometry "name" is a text column, not a geometry`}},
		{name: "geography", cfg: layers.Layer{Table: "test_pglayers.geog"},
			want: []string{`geometry "g" is a geography column`, `"g"::geometry`}},
		{name: "no SRID", cfg: layers.Layer{Table: "test_pglayers.srid0"},
			want: []string{`geometry "geom" has no SRID (0)`,
				`ALTER TABLE "test_pglayers"."srid0" ALTER COLUMN "geom" TYPE geometry(Point, 4326) USING ST_SetSRID("geom", 4326)`}},
		{name: "several geometry columns", cfg: layers.Layer{Table: "test_pglayers.twogeoms"},
			want: []string{`table test_pglayers.twogeoms has several geometry columns ("a", "b"): name the one to draw as the layer's geometry`}},
		{name: "curves", cfg: layers.Layer{Table: "test_pglayers.curvy"},
			want: []string{`geometry column "geom" is of type CURVEPOLYGON`, `ST_CurveToLine`}},
		{name: "no such id column", cfg: layers.Layer{Table: "test_pglayers.pts4326", ID: "gid"},
			want: []string{`id "gid": no such column in table test_pglayers.pts4326`}},
		{name: "id not an integer", cfg: layers.Layer{Table: "test_pglayers.badtypes", ID: "t"},
			want: []string{`id "t" is a text column`, `smallint, integer or bigint`}},
		{name: "id a numeric", cfg: layers.Layer{Table: "test_pglayers.badtypes", ID: "n"},
			want: []string{`id "n" is a numeric column`}},
		{name: "no such property", cfg: layers.Layer{Table: "test_pglayers.pts4326", Properties: []string{"name", "nosuch"}},
			want: []string{`property "nosuch": no such column in table test_pglayers.pts4326`}},
		{name: "property of bytea", cfg: layers.Layer{Table: "test_pglayers.badtypes", Properties: []string{"bin"}},
			want: []string{`property "bin" is a bytea column`}},
		{name: "property of another geometry", cfg: layers.Layer{Table: "test_pglayers.twogeoms", Geometry: "a", Properties: []string{"b"}},
			want: []string{`property "b" is a geometry column`}},
		{name: "no such filter column", cfg: layers.Layer{Table: "test_pglayers.pts4326",
			Filter: &layers.Filter{Column: "nosuch", MinByZoom: map[int]float64{0: 1}}},
			want: []string{`filter column "nosuch": no such column`}},
		{name: "filter not a number", cfg: layers.Layer{Table: "test_pglayers.pts4326",
			Filter: &layers.Filter{Column: "name", MinByZoom: map[int]float64{0: 1}}},
			want: []string{`filter column "name" is a text column: min_by_zoom compares numbers`}},
		{name: "no such function", cfg: layers.Layer{Function: "test_pglayers.nosuch"},
			want: []string{`function "test_pglayers.nosuch": no such function(integer, integer, integer, jsonb) returning bytea`}},
		{name: "function of other arguments", cfg: layers.Layer{Function: "test_pglayers.bad_args"},
			want: []string{`no such function(integer, integer, integer, jsonb)`,
				`there is test_pglayers.bad_args(integer,integer,integer) returns bytea`, `(z integer, x integer, y integer, params jsonb)`}},
		{name: "function returning text", cfg: layers.Layer{Function: "test_pglayers.bad_return"},
			want: []string{`test_pglayers.bad_return(integer, integer, integer, jsonb) returns text`}},
		{name: "function returning a set", cfg: layers.Layer{Function: "test_pglayers.bad_set"},
			want: []string{`returns setof bytea`}},
		{name: "function the role may not call", cfg: layers.Layer{Function: "test_pglayers.private"}, reader: true,
			want: []string{`no privilege`, `"test_pglayers_reader" may not EXECUTE test_pglayers.private(integer, integer, integer, jsonb)`}},
		{name: "function name that is SQL", cfg: layers.Layer{Function: "test_pglayers.grid(integer); DROP TABLE test_pglayers.pts4326; --"},
			want: []string{`no such function`}},
		{name: "pmtiles", cfg: layers.Layer{PMTiles: "x.pmtiles"},
			want: []string{`a pmtiles layer is not a PostGIS table or function`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := owner
			if tc.reader {
				pool = readerPool
			}
			tc.cfg.Name = "bad"
			_, _, err := Open(context.Background(), pool, timeout, tc.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append([]string{`pglayers: layer "bad": `}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
		})
	}
	if !exists(t, owner, "test_pglayers.pts4326") {
		t.Error("a layer's name was run as SQL: pts4326 is gone")
	}
}

// exists reports whether the table called name exists.
func exists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// Open fills in the defaults from the catalog: the only geometry column,
// the primary key as the id, every other column a tile can carry as a
// property (typed for TileJSON), the table's comment, its bounds.
func TestOpenDefaults(t *testing.T) {
	owner, _ := db(t)
	ctx := context.Background()
	l, warnings, err := Open(ctx, owner, timeout, layers.Layer{Name: "pts", Table: "test_pglayers.pts4326", MinZoom: zoom(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
	want := map[string]string{
		"name": "String", "pop": "Number", "score": "Number", "flag": "Boolean", "tags": "String",
		"meta": "String", "amount": "Number", "Upper Name": "String",
	}
	if !reflect.DeepEqual(l.Fields, want) {
		t.Errorf("fields %v, want %v", l.Fields, want)
	}
	if l.Name != "pts" || l.Description != "Random points" || l.MinZoom != 2 || l.MaxZoom != 22 || l.MaxFeatures != layers.DefaultMaxFeatures {
		t.Errorf("layer %+v", l)
	}
	// The points reach the poles; the bounds stop at Web Mercator's limit.
	if b := l.Bounds; b[0] > -179 || b[2] < 179 || b[1] != -maxLat || b[3] != maxLat {
		t.Errorf("bounds %v", b)
	}
	src := l.Source.(*tableSource)
	if src.idName != "__id" || !strings.Contains(src.sql, `CASE WHEN r."id" >= 0 THEN r."id" END`) {
		t.Errorf("the id is not the primary key:\n%s", src.sql)
	}

	// A table whose primary key is text: no id, ordered by the key; the
	// text, numeric and jsonb columns are properties, the bytea one not.
	l, _, err = Open(ctx, owner, timeout, layers.Layer{Name: "bad-types", Table: "test_pglayers.badtypes"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"tid": "String", "n": "Number", "j": "String", "t": "String"}; !reflect.DeepEqual(l.Fields, want) {
		t.Errorf("fields %v, want %v", l.Fields, want)
	}
	src = l.Source.(*tableSource)
	for _, w := range []string{`r."j"::text AS "j"`, `r."n"::double precision AS "n"`, `ORDER BY r."tid"`} {
		if !strings.Contains(src.sql, w) {
			t.Errorf("the SQL has no %s:\n%s", w, src.sql)
		}
	}
	if strings.Contains(src.sql, "@idname") || strings.Contains(src.sql, `"__id"`) {
		t.Errorf("a table without an integer key has an id:\n%s", src.sql)
	}

	// Bounds of projected data, in degrees.
	l, _, err = Open(ctx, owner, timeout, layers.Layer{Name: "fr", Table: "test_pglayers.polys2154"})
	if err != nil {
		t.Fatal(err)
	}
	if b := l.Bounds; b[0] < -7 || b[0] > -1 || b[2] < 6 || b[2] > 12 || b[1] < 40 || b[1] > 44 || b[3] < 49 || b[3] > 53 {
		t.Errorf("bounds of France %v", b)
	}
}

// A table without a spatial index is served, with a warning saying how to
// make one; a view is not warned about (its tables' indexes serve it).
func TestOpenWarnings(t *testing.T) {
	owner, _ := db(t)
	ctx := context.Background()
	_, warnings, err := Open(ctx, owner, timeout, layers.Layer{Name: "slow", Table: "test_pglayers.noindex"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || warnings[0].Layer != "slow" ||
		!strings.Contains(warnings[0].String(), `layer "slow": no spatial index on "geom": tiles would scan the whole table; CREATE INDEX ON "test_pglayers"."noindex" USING gist ("geom")`) {
		t.Errorf("warnings %v", warnings)
	}
	for _, table := range []string{"test_pglayers.v_big", "test_pglayers.mv_small"} {
		_, warnings, err = Open(ctx, owner, timeout, layers.Layer{Name: "v", Table: table, ID: "id"})
		if err != nil || len(warnings) != 0 {
			t.Errorf("%s: %v, warnings %v", table, err, warnings)
		}
	}
}

// The domain of a projected SRID leaves out where PROJ refuses points (UTM
// 90° from its meridian), and a geographic SRID needs none.
func TestDomain(t *testing.T) {
	owner, _ := db(t)
	ctx := context.Background()
	for _, tc := range []struct {
		srid  int32
		whole bool
		in    [2]float64 // lon, lat inside
		out   [2]float64 // and outside, for a partial domain
	}{
		{srid: 4326, whole: true},
		{srid: 4258, whole: true},
		{srid: 2154, whole: true},
		{srid: 32633, in: [2]float64{15, 50}, out: [2]float64{105, 0}},
		{srid: 27700, in: [2]float64{-2, 54}, out: [2]float64{-92, 0}},
	} {
		d, err := domain(ctx, owner, timeout, tc.srid)
		if err != nil {
			t.Fatalf("%d: %v", tc.srid, err)
		}
		if (d == nil) != tc.whole {
			t.Errorf("%d: whole world %v, want %v", tc.srid, d == nil, tc.whole)
		}
		if d == nil {
			continue
		}
		var in, out bool
		err = owner.QueryRow(ctx, `
			SELECT ST_Intersects(d, ST_Transform(ST_SetSRID(ST_Point($2, $3), 4326), 3857)),
			       ST_Intersects(d, ST_Transform(ST_SetSRID(ST_Point($4, $5), 4326), 3857))
			FROM (SELECT ST_GeomFromEWKB($1) AS d) x`, d, tc.in[0], tc.in[1], tc.out[0], tc.out[1]).Scan(&in, &out)
		if err != nil {
			t.Fatal(err)
		}
		if !in || out {
			t.Errorf("%d: %v in the domain %v, %v in it %v", tc.srid, tc.in, in, tc.out, out)
		}
	}
	if _, err := domain(ctx, owner, timeout, 999999); err == nil || !strings.Contains(err.Error(), "SRID 999999 is not in spatial_ref_sys") {
		t.Errorf("unknown SRID: %v", err)
	}
}

func TestLayerName(t *testing.T) {
	taken := map[string]bool{}
	for _, tc := range []struct{ in, want string }{
		{"public_parcels", "public_parcels"},
		{"Public_Parcels", "public_parcels_2"},
		{"__x y.z", "x_y_z"},
		{"a-b", "a-b"},
		{"___", "layer"},
		{strings.Repeat("n", 70), strings.Repeat("n", 63)},
		{strings.Repeat("n", 64), strings.Repeat("n", 61) + "_2"},
	} {
		if got := uniqueName(layerName(tc.in), taken); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}
