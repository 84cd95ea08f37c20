package pgsets

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/wkb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/validators/geojsoncheck"
)

// TestGeometries checks which answers carry geometries, and that they are
// GeoJSON as RFC 7946 wants, polygons wound by the right-hand rule
// whichever way the table winds them, checked here and by validators
// tileapi did not write (geojsoncheck).
func TestGeometries(t *testing.T) {
	ctx := context.Background()
	parcels := openSet(t, layers.Set{Name: "parcels", Table: "test_pgsets.parcels"})
	stores := openSet(t, layers.Set{Name: "stores", Table: "test_pgsets.stores"})
	roads := openSet(t, layers.Set{Name: "roads", Table: "test_pgsets.roads"})
	paris := geofence.WithinQuery{Lng: 2.35, Lat: 48.85, Radius: 20_000, Limit: 1000}
	withGeometry := paris
	withGeometry.Geometry = true
	inside := geofence.ContainsQuery{Lng: 2.34, Lat: 48.856}
	var docs []geojsoncheck.Doc
	for _, tc := range []struct {
		name     string
		set      geofence.Set
		within   *geofence.WithinQuery
		contains *geofence.ContainsQuery
		geometry string // the type of every feature's geometry, "" for none
	}{
		{name: "parcels within", set: parcels, within: &paris},
		{name: "parcels within with geometry", set: parcels, within: &withGeometry, geometry: "MultiPolygon"},
		{name: "parcels contains", set: parcels, contains: &inside},
		{name: "parcels contains with geometry", set: parcels, contains: &geofence.ContainsQuery{Lng: inside.Lng, Lat: inside.Lat, Geometry: true}, geometry: "MultiPolygon"},
		{name: "stores within: points always", set: stores, within: &paris, geometry: "Point"},
		{name: "roads within", set: roads, within: &paris},
		{name: "roads within with geometry", set: roads, within: &withGeometry, geometry: "LineString"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fs []*geojson.Feature
			var err error
			if tc.within != nil {
				fs, err = tc.set.Source.Within(ctx, *tc.within)
			} else {
				fs, err = tc.set.Source.Contains(ctx, *tc.contains)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) < 2 {
				t.Fatalf("%d features; want several", len(fs))
			}
			clockwise := 0 // features wound clockwise in the table: even gids
			for _, f := range fs {
				switch {
				case tc.geometry == "" && f.Geometry != nil:
					t.Errorf("feature %v: geometry %s, want none", f.ID, f.Geometry.GeoJSONType())
				case tc.geometry != "" && (f.Geometry == nil || f.Geometry.GeoJSONType() != tc.geometry):
					t.Fatalf("feature %v: geometry %v, want a %s", f.ID, f.Geometry, tc.geometry)
				}
				if mp, ok := f.Geometry.(orb.MultiPolygon); ok {
					if d := geojsoncheck.Polygons(mp); len(d) > 0 {
						t.Errorf("feature %v: %q", f.ID, d)
					}
					if f.ID.(int64)%2 == 0 {
						clockwise++
					}
				}
			}
			if tc.geometry == "MultiPolygon" && clockwise == 0 {
				t.Error("no feature wound clockwise in the table: the winding is not tested")
			}
			fc := geojson.NewFeatureCollection()
			fc.Features = fs
			b, err := json.Marshal(fc)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, geojsoncheck.Doc{Name: tc.name, Body: string(b)})
		})
	}
	for _, r := range geojsoncheck.Check(t, docs) {
		if len(r.Hints) > 0 || len(r.Invalid) > 0 {
			t.Errorf("%s: %+v %+v", r.Name, r.Hints, r.Invalid)
		}
	}
}

// TestProperties checks the JSON types of properties, NULL as null, and
// geometries in two dimensions.
func TestProperties(t *testing.T) {
	ctx := context.Background()
	stores := openSet(t, layers.Set{Name: "stores", Table: "test_pgsets.stores"})
	// Store 5 is at random; find it from its own point.
	fs, err := stores.Source.Contains(ctx, geofence.ContainsQuery{Lng: 0, Lat: 0})
	if err == nil {
		t.Errorf("contains on points: %v, want an error", fs)
	}
	var lng, lat float64
	if err := testPool(t).QueryRow(ctx, "SELECT ST_X(geom), ST_Y(geom) FROM test_pgsets.stores WHERE id = 5").Scan(&lng, &lat); err != nil {
		t.Fatal(err)
	}
	fs, err = stores.Source.Within(ctx, geofence.WithinQuery{Lng: lng, Lat: lat, Radius: 1, Limit: 1})
	if err != nil || len(fs) != 1 {
		t.Fatalf("%v, %v", fs, err)
	}
	f := fs[0]
	want := geojson.Properties{"name": "store 5", "rank": int64(5), "open": false, "opened": "2020-01-06", "note": nil, "distance": 0.0}
	score, _ := f.Properties["score"].(float64)
	delete(f.Properties, "score")
	if f.ID != int64(5) || !maps.Equal(f.Properties, want) || score <= 0 || score >= 100 {
		t.Errorf("got id %v (%T), %#v, score %v; want %#v", f.ID, f.ID, f.Properties, score, want)
	}

	parcels := openSet(t, layers.Set{Name: "parcels", Table: "test_pgsets.parcels", Properties: []string{"area_m2", "owner"}})
	fs, err = parcels.Source.Contains(ctx, geofence.ContainsQuery{Lng: 2.34, Lat: 48.856})
	if err != nil || len(fs) == 0 {
		t.Fatalf("%v, %v", fs, err)
	}
	if a, ok := fs[0].Properties["area_m2"].(float64); !ok || a <= 0 || len(fs[0].Properties) != 2 {
		t.Errorf("numeric area_m2: %#v", fs[0].Properties)
	}

	heights := openSet(t, layers.Set{Name: "heights", Table: "test_pgsets.heights"})
	fs, err = heights.Source.Within(ctx, geofence.WithinQuery{Lng: 1, Lat: 1, Radius: 100, Limit: 1})
	if err != nil || len(fs) != 1 || fs[0].Geometry != (orb.Point{1.0002, 1.0002}) {
		t.Errorf("a point with a height: %v, %v; want it in two dimensions", fs, err)
	}

	generic := openSet(t, layers.Set{Name: "generic", Table: "test_pgsets.generic"})
	fs, err = generic.Source.Within(ctx, geofence.WithinQuery{Lng: 1, Lat: 1, Radius: 100, Limit: 10, Geometry: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, fmt.Sprintf("%v %s", f.ID, f.Geometry.GeoJSONType()))
	}
	// Distance 0 for the point, the line's end, the polygon around the
	// point (by id); then the multipoint, then the collection.
	if w := []string{"1 Point", "2 LineString", "3 Polygon", "5 MultiPoint", "4 GeometryCollection"}; !slices.Equal(got, w) {
		t.Errorf("got %v, want %v", got, w)
	}
}

// fileFeaturesSQL reads a table's rows as a GeoJSON file would hold them:
// the id, every column as a property, the geometry in WGS84.
const fileFeaturesSQL = `SELECT %[2]s::float8 AS id, to_jsonb(t) AS properties, ST_AsBinary(ST_Transform(geom, 4326)) AS wkb FROM %[1]s AS t ORDER BY random()`

// fileSet returns the file set of the rows of ts's table, with the
// properties of pg.
func fileSet(t *testing.T, ts tableSet, pg geofence.Set) geofence.Set {
	t.Helper()
	ctx := context.Background()
	pool := testPool(t)
	if _, err := pool.Exec(ctx, "SELECT setseed(0.5)"); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, fmt.Sprintf(fileFeaturesSQL, ts.table, ts.id))
	if err != nil {
		t.Fatal(err)
	}
	features, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*geojson.Feature, error) {
		var id float64
		var props, b []byte
		if err := r.Scan(&id, &props, &b); err != nil {
			return nil, err
		}
		g, err := wkb.Unmarshal(b)
		if err != nil {
			return nil, err
		}
		f := geojson.NewFeature(g)
		f.ID = id
		return f, json.Unmarshal(props, &f.Properties)
	})
	if err != nil {
		t.Fatal(err)
	}
	props := []string{} // not nil: none is none
	for p := range pg.Fields {
		if p != geofence.DistanceProperty {
			props = append(props, p)
		}
	}
	fs, err := geofence.NewFileSet(pg.Name, pg.Description, features, props)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// featureJSON is f as JSON without its distance.
func featureJSON(t *testing.T, f *geojson.Feature) string {
	t.Helper()
	g := *f
	g.Properties = maps.Clone(f.Properties)
	delete(g.Properties, geofence.DistanceProperty)
	b, err := json.Marshal(&g)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFileSetMatchesPostGIS runs random queries on the file set
// (geofence.NewFileSet) of each table's rows and on the table's set, and
// requires the same answers: the same features, in the same order, at
// distances within a millionth of each other, with the same properties and
// geometries; and the same questions and fields. Contains is compared on
// the set in WGS84, where both take edges to be straight in longitude and
// latitude.
func TestFileSetMatchesPostGIS(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	const seed = 20261203
	for i, ts := range tableSets {
		if ts.cfg.Name == "zones" {
			continue // its answers are mostly out of its SRID's domain
		}
		t.Run(ts.cfg.Name, func(t *testing.T) {
			pg := openSet(t, ts.cfg)
			file := fileSet(t, ts, pg)
			if pg.Within != file.Within || pg.Contains != file.Contains || pg.PointsOnly != file.PointsOnly || !maps.Equal(pg.Fields, file.Fields) {
				t.Errorf("postgis %+v, file %+v", pg, file)
			}
			ps := sites(t, pool, ts)
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			n, found, spared := 250, 0, 0
			for j := range n {
				kind, q := randomQuery(rng, ps)
				q.Geometry = rng.IntN(2) == 0
				name := fmt.Sprintf("query %d (%s, seed %d): %+v", j, kind, seed, q)
				want, err := pg.Source.Within(ctx, q)
				if err != nil {
					t.Fatalf("%s: postgis: %v", name, err)
				}
				got, err := file.Source.Within(ctx, q)
				if err != nil {
					t.Fatalf("%s: file: %v", name, err)
				}
				if len(want) > 0 {
					found++
				}
				spared += compareWithin(t, name, q, hits(t, want), hits(t, got), 1e-6, 1e-6)
				byID := map[any]*geojson.Feature{}
				for _, f := range got {
					byID[f.ID] = f
				}
				for _, w := range want {
					if g := byID[w.ID]; g != nil && featureJSON(t, g) != featureJSON(t, w) {
						t.Errorf("%s: file\n%s\npostgis\n%s", name, featureJSON(t, g), featureJSON(t, w))
					}
				}
				if !pg.Contains || ts.srid != 4326 {
					continue
				}
				cq := geofence.ContainsQuery{Lng: q.Lng, Lat: q.Lat, Geometry: q.Geometry}
				if want, err = pg.Source.Contains(ctx, cq); err != nil {
					t.Fatal(err)
				}
				if got, err = file.Source.Contains(ctx, cq); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Errorf("%s: contains: file %v, postgis %v", name, hits(t, got), hits(t, want))
					continue
				}
				for k := range want {
					if featureJSON(t, got[k]) != featureJSON(t, want[k]) {
						t.Errorf("%s: contains %d: file\n%s\npostgis\n%s", name, k, featureJSON(t, got[k]), featureJSON(t, want[k]))
					}
				}
			}
			t.Logf("%d queries, %d found features, %d features near the radius in one answer only", n, found, spared)
		})
	}
}
