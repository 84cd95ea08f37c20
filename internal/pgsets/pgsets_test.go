package pgsets

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

func TestOpenErrors(t *testing.T) {
	pool := testPool(t)
	for _, tc := range []struct {
		name string
		cfg  layers.Set
		want string // in the error, after the set's name
	}{
		{"no table", layers.Set{File: "x.geojson"}, "names no table"},
		{"no such table", layers.Set{Table: "test_pgsets.nope"}, `table "test_pgsets.nope": no such table or view`},
		{"no such schema", layers.Set{Table: "nope.stores"}, `no such table or view`},
		{"bad name", layers.Set{Table: "a.b.c.d"}, `table "a.b.c.d": `},
		{"a sequence", layers.Set{Table: "test_pgsets.seq"}, "is a sequence, not a table or view"},
		{"no geometry column", layers.Set{Table: "test_pgsets.plain"}, "no geometry column"},
		{"two geometry columns", layers.Set{Table: "test_pgsets.two_geoms"}, "2 geometry columns (a, b): name one with geometry"},
		{"no such geometry column", layers.Set{Table: "test_pgsets.stores", Geometry: "the_geom"}, `geometry column "the_geom": no such column`},
		{"not a geometry", layers.Set{Table: "test_pgsets.stores", Geometry: "name"}, `geometry column "name" is of type text, not a geometry`},
		{"geography", layers.Set{Table: "test_pgsets.geog", Geometry: "geom"}, `geometry column "geom" is of type geography(Point,4326), not a geometry`},
		{"no SRID", layers.Set{Table: "test_pgsets.nosrid"}, `geometry column "geom" has no SRID (0)`},
		{"unknown SRID", layers.Set{Table: "test_pgsets.unknown_srid"}, `SRID 990001 is not in spatial_ref_sys`},
		{"curved", layers.Set{Table: "test_pgsets.curvy"}, `is of type CIRCULARSTRING: curved`},
		{"no such id column", layers.Set{Table: "test_pgsets.stores", ID: "gid"}, `id column "gid": no such column`},
		{"id not an integer", layers.Set{Table: "test_pgsets.stores", ID: "name"}, `id column "name" is of type text, not an integer`},
		{"id a float", layers.Set{Table: "test_pgsets.stores", ID: "score"}, `id column "score" is of type double precision, not an integer`},
		{"no such property", layers.Set{Table: "test_pgsets.stores", Properties: []string{"name", "city"}}, `property "city": no such column`},
		{"property not a scalar", layers.Set{Table: "test_pgsets.stores", Properties: []string{"tags"}}, `property "tags" is of type text[], not a number`},
		{"property a geometry", layers.Set{Table: "test_pgsets.two_geoms", Geometry: "a", Properties: []string{"b"}}, `property "b" is of type geometry(Point,4326)`},
		{"property distance", layers.Set{Table: "test_pgsets.order", Properties: []string{"distance"}}, `property "distance": within answers give`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "set-" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := Open(context.Background(), pool, 5*time.Second, tc.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			if prefix := fmt.Sprintf("pgsets: set %q: ", tc.cfg.Name); !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want %q then %q", err, prefix, tc.want)
			}
		})
	}
}

// TestOpen checks what Open reads from the catalog: the questions, the
// defaults of id and properties, and the fields.
func TestOpen(t *testing.T) {
	for _, tc := range []struct {
		cfg                          layers.Set
		within, contains, pointsOnly bool
		fields                       map[string]string
		id                           string // the source's id column: "" for none
	}{
		{
			cfg:    layers.Set{Table: "test_pgsets.stores", Description: "Stores"},
			within: true, pointsOnly: true, id: "id",
			fields: map[string]string{"name": "String", "rank": "Number", "score": "Number", "open": "Boolean",
				"opened": "String", "note": "String", "distance": "Number"},
		},
		{
			cfg:    layers.Set{Table: "test_pgsets.parcels", Properties: []string{"owner"}},
			within: true, contains: true, id: "gid",
			fields: map[string]string{"owner": "String", "distance": "Number"},
		},
		{
			cfg:    layers.Set{Table: "test_pgsets.roads"},
			within: true, id: "id", fields: map[string]string{"name": "String", "distance": "Number"},
		},
		{
			// A view has no primary key; its geometry is declared by a cast.
			cfg:    layers.Set{Table: "test_pgsets.parcels_wgs84"},
			within: true, contains: true,
			fields: map[string]string{"gid": "Number", "owner": "String", "distance": "Number"},
		},
		{
			// A reserved word, quoted identifiers, a column "distance" left out.
			cfg:    layers.Set{Table: "test_pgsets.order"},
			within: true, pointsOnly: true, id: "select",
			fields: map[string]string{"from": "String", "Mixed Case": "String", "distance": "Number"},
		},
		{
			// Generic geometry: within only, whatever it holds.
			cfg:    layers.Set{Table: "test_pgsets.generic"},
			within: true, id: "id", fields: map[string]string{"distance": "Number"},
		},
		{
			// A text primary key is no id.
			cfg:    layers.Set{Table: "test_pgsets.text_key"},
			within: true, pointsOnly: true, fields: map[string]string{"code": "String", "distance": "Number"},
		},
		{
			// An id named: not a property by default.
			cfg:    layers.Set{Table: "test_pgsets.stores", ID: "rank", Properties: nil},
			within: true, pointsOnly: true, id: "rank",
			fields: map[string]string{"id": "Number", "name": "String", "score": "Number", "open": "Boolean",
				"opened": "String", "note": "String", "distance": "Number"},
		},
	} {
		t.Run(tc.cfg.Table, func(t *testing.T) {
			tc.cfg.Name = "s"
			s := openSet(t, tc.cfg)
			if s.Name != "s" || s.Description != tc.cfg.Description || s.Within != tc.within || s.Contains != tc.contains || s.PointsOnly != tc.pointsOnly {
				t.Errorf("got %+v", s)
			}
			if fmt.Sprint(s.Fields) != fmt.Sprint(tc.fields) {
				t.Errorf("fields %v, want %v", s.Fields, tc.fields)
			}
			src := s.Source.(*source)
			if hasID := strings.Contains(src.within, " AS k"); hasID != (tc.id != "") ||
				tc.id != "" && !strings.Contains(src.within, pgx.Identifier{tc.id}.Sanitize()+" AS k") {
				t.Errorf("id %q, within SQL:\n%s", tc.id, src.within)
			}
		})
	}
}

// tableSet is a set under test and the plain SQL it must agree with.
type tableSet struct {
	cfg       layers.Set
	table, id string // quoted
	srid      int
}

var tableSets = []tableSet{
	{cfg: layers.Set{Name: "stores", Table: "test_pgsets.stores"}, table: `test_pgsets.stores`, id: "id", srid: 4326},
	{cfg: layers.Set{Name: "parcels", Table: "test_pgsets.parcels"}, table: `test_pgsets.parcels`, id: "gid", srid: 2154},
	{cfg: layers.Set{Name: "roads", Table: "test_pgsets.roads"}, table: `test_pgsets.roads`, id: "id", srid: 3857},
	{cfg: layers.Set{Name: "zones", Table: "test_pgsets.zones"}, table: `test_pgsets.zones`, id: "id", srid: 32633},
	{cfg: layers.Set{Name: "parcels-wgs84", Table: "test_pgsets.parcels_wgs84", ID: "gid"}, table: `test_pgsets.parcels_wgs84`, id: "gid", srid: 4326},
	{cfg: layers.Set{Name: "order", Table: "test_pgsets.order"}, table: `test_pgsets."order"`, id: `"select"`, srid: 4326},
	{cfg: layers.Set{Name: "generic", Table: "test_pgsets.generic"}, table: `test_pgsets.generic`, id: "id", srid: 4326},
}

// plainWithinSQL is within in plain PostGIS, without the prefilter: the
// table's rows within $3 metres of ($1, $2), nearest first, ties by id,
// at most $4.
const plainWithinSQL = `
SELECT %[2]s::bigint AS id,
       ST_Distance(ST_Transform(geom, 4326)::geography, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography) AS distance
FROM %[1]s
WHERE ST_DWithin(ST_Transform(geom, 4326)::geography, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography, $3)
ORDER BY distance, id
LIMIT $4`

// plainContainsSQL is contains in plain PostGIS: the rows whose geometry
// contains ($1, $2) in SRID $3, by id.
const plainContainsSQL = `
SELECT %[2]s::bigint AS id
FROM %[1]s
WHERE ST_Contains(geom, ST_Transform(ST_SetSRID(ST_MakePoint($1, $2), 4326), $3::integer))
ORDER BY id`

// sitesSQL gives a point on (or near) each row's geometry, in WGS84.
const sitesSQL = `SELECT ST_X(p) AS lng, ST_Y(p) AS lat
FROM (SELECT ST_PointOnSurface(ST_Transform(geom, 4326)) AS p FROM %[1]s ORDER BY %[2]s) AS s`

// hit is a feature of an answer: its id, and its distance (within).
type hit struct {
	ID       int64   `db:"id"`
	Distance float64 `db:"distance"`
}

func hits(t *testing.T, fs []*geojson.Feature) []hit {
	t.Helper()
	hs := make([]hit, len(fs))
	for i, f := range fs {
		id, ok := f.ID.(int64)
		if !ok {
			t.Fatalf("feature %d: id %v (%T), not an int64", i, f.ID, f.ID)
		}
		hs[i].ID = id
		if d, ok := f.Properties[geofence.DistanceProperty]; ok {
			hs[i].Distance = d.(float64)
		}
	}
	return hs
}

// sites returns a point on each feature of ts's table.
func sites(t *testing.T, pool *pgxpool.Pool, ts tableSet) []orb.Point {
	t.Helper()
	rows, err := pool.Query(context.Background(), fmt.Sprintf(sitesSQL, ts.table, ts.id))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (orb.Point, error) {
		var p orb.Point
		return p, r.Scan(&p[0], &p[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// randomQuery returns a within query of one of several kinds, so that
// queries hit both empty and dense areas, the antimeridian and the poles.
func randomQuery(rng *rand.Rand, sites []orb.Point) (string, geofence.WithinQuery) {
	var kind string
	var c orb.Point
	switch rng.IntN(6) {
	case 0:
		kind, c = "anywhere", orb.Point{rng.Float64()*360 - 180, math.Asin(rng.Float64()*2-1) * 180 / math.Pi}
	case 1:
		kind, c = "antimeridian", orb.Point{math.Copysign(179.5+rng.Float64()/2, rng.Float64()-0.5), -16.5 + rng.NormFloat64()}
	case 2:
		kind, c = "polar", orb.Point{rng.Float64()*360 - 180, math.Copysign(88+rng.Float64()*2, rng.Float64()-0.5)}
	default:
		p := sites[rng.IntN(len(sites))]
		kind, c = "near a feature", orb.Point{
			min(max(p[0]+rng.NormFloat64()*0.01, -180), 180),
			min(max(p[1]+rng.NormFloat64()*0.01, -90), 90),
		}
	}
	q := geofence.WithinQuery{
		Lng: c[0], Lat: c[1],
		Radius: math.Exp(rng.Float64()*math.Log(geofence.MaxRadius/10)) * 10, // log-uniform in [10 m, MaxRadius]
		Limit:  geofence.MaxLimit,
	}
	if rng.IntN(4) == 0 {
		q.Limit = 1 + rng.IntN(20)
	}
	return kind, q
}

// compareWithin reports where got differs from want by more than a
// distance may (rel relative plus abs metres): a feature in one answer
// only, unless that near the radius or near the last distance of an
// answer cut by its limit; a distance; an order that is not by distance,
// then id. It returns how many features it let be in one answer only.
func compareWithin(t *testing.T, name string, q geofence.WithinQuery, want, got []hit, rel, abs float64) int {
	t.Helper()
	tol := func(d float64) float64 { return rel*d + abs }
	for _, hs := range [][]hit{want, got} {
		for i := 1; i < len(hs); i++ {
			if a, b := hs[i-1], hs[i]; a.Distance > b.Distance || a.Distance == b.Distance && a.ID > b.ID {
				t.Errorf("%s: %d at %.9f m before %d at %.9f m", name, a.ID, a.Distance, b.ID, b.Distance)
			}
		}
	}
	cut := math.Inf(1)
	for _, hs := range [][]hit{want, got} {
		if len(hs) == q.Limit {
			cut = min(cut, hs[len(hs)-1].Distance)
		}
	}
	index := func(hs []hit) map[int64]float64 {
		m := map[int64]float64{}
		for _, h := range hs {
			m[h.ID] = h.Distance
		}
		return m
	}
	w, g := index(want), index(got)
	spared := 0
	for _, side := range []struct {
		in, other map[int64]float64
		what      string
	}{{w, g, "want has %d at %.9f m, got does not"}, {g, w, "got has %d at %.9f m, want does not"}} {
		for id, d := range side.in {
			od, ok := side.other[id]
			switch {
			case ok && math.Abs(od-d) > tol(d):
				t.Errorf("%s: %d at %.9f m, and at %.9f m", name, id, d, od)
			case ok:
			case math.Abs(d-q.Radius) <= tol(d) || d >= cut-tol(cut):
				spared++
			default:
				t.Errorf("%s: "+side.what, name, id, d)
			}
		}
	}
	if len(want) == len(got) && spared == 0 {
		for i := range want {
			if want[i].ID != got[i].ID && math.Abs(want[i].Distance-got[i].Distance) > tol(want[i].Distance) {
				t.Errorf("%s: at %d, %d where %d", name, i, got[i].ID, want[i].ID)
			}
		}
	}
	return spared
}

// TestWithinMatchesSQL runs random within queries on each set and on
// plain SQL over the same table (ST_DWithin on geography, no prefilter)
// and requires the same features, in the same order, at the same
// distances.
func TestWithinMatchesSQL(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	const seed = 20261201
	for i, ts := range tableSets {
		t.Run(ts.cfg.Name, func(t *testing.T) {
			s := openSet(t, ts.cfg)
			ps := sites(t, pool, ts)
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			n, found, kinds := 200, 0, map[string]int{}
			for j := range n {
				kind, q := randomQuery(rng, ps)
				kinds[kind]++
				name := fmt.Sprintf("query %d (%s, seed %d): %+v", j, kind, seed, q)
				fs, err := s.Source.Within(ctx, q)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				rows, err := pool.Query(ctx, fmt.Sprintf(plainWithinSQL, ts.table, ts.id), q.Lng, q.Lat, q.Radius, q.Limit)
				if err != nil {
					t.Fatal(err)
				}
				want, err := pgx.CollectRows(rows, pgx.RowToStructByName[hit])
				if err != nil {
					t.Fatal(err)
				}
				if len(want) > 0 {
					found++
				}
				compareWithin(t, name, q, want, hits(t, fs), 1e-9, 1e-7)
			}
			t.Logf("%d queries (%v), %d found features", n, kinds, found)
			if found < n/4 {
				t.Errorf("only %d of %d queries found features", found, n)
			}
		})
	}
}

// TestContainsMatchesSQL runs random contains queries on each polygon set
// and on plain SQL (ST_Contains, in the stored SRID), and requires the
// same features in the same order.
func TestContainsMatchesSQL(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	const seed = 20261202
	for i, ts := range tableSets {
		s := openSet(t, ts.cfg)
		if !s.Contains {
			continue
		}
		t.Run(ts.cfg.Name, func(t *testing.T) {
			ps := sites(t, pool, ts)
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			n, found, outside := 300, 0, 0
			for j := range n {
				kind, q := randomQuery(rng, ps)
				cq := geofence.ContainsQuery{Lng: q.Lng, Lat: q.Lat}
				fs, err := s.Source.Contains(ctx, cq)
				if err != nil {
					t.Fatalf("query %d (%s): %+v: %v", j, kind, cq, err)
				}
				rows, err := pool.Query(ctx, fmt.Sprintf(plainContainsSQL, ts.table, ts.id), q.Lng, q.Lat, ts.srid)
				if err != nil {
					t.Fatal(err)
				}
				want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if outsideProjection(err) {
					outside++ // the SRID has no coordinates for the point: nothing contains it
				} else if err != nil {
					t.Fatal(err)
				}
				got := []int64{}
				for _, h := range hits(t, fs) {
					got = append(got, h.ID)
				}
				if len(want) > 0 {
					found++
				}
				if !slices.Equal(got, want) {
					t.Errorf("query %d (%s, seed %d) at %v: got %v, want %v", j, kind, seed, cq, got, want)
				}
			}
			t.Logf("%d queries, %d inside a feature, %d outside the SRID's domain", n, found, outside)
			if found < n/10 {
				t.Errorf("only %d of %d queries inside a feature", found, n)
			}
		})
	}
}

// TestUsesIndex checks that PostgreSQL's plans of within (one box, two
// across the antimeridian, a band at a pole) and contains scan the
// table's GiST index on its stored SRID.
func TestUsesIndex(t *testing.T) {
	pool := testPool(t)
	for _, tc := range []struct {
		table, index string
	}{
		{"test_pgsets.stores", "stores_geom_idx"},
		{"test_pgsets.parcels", "parcels_geom_idx"},
		{"test_pgsets.roads", "roads_geom_idx"},
		{"test_pgsets.order", "order_geom_idx"},
	} {
		s := openSet(t, layers.Set{Name: "s", Table: tc.table}).Source.(*source)
		for _, q := range []geofence.WithinQuery{
			{Lng: 2.35, Lat: 48.85, Radius: 1000, Limit: 10},
			{Lng: 179.95, Lat: -16.5, Radius: 50000, Limit: 10},
			{Lng: 10, Lat: 89.5, Radius: 20000, Limit: 10},
		} {
			t.Run(fmt.Sprintf("%s within %v", tc.table, q), func(t *testing.T) {
				if n := len(q.Bounds()); q.Lng > 179 && n != 2 {
					t.Fatalf("%d boxes across the antimeridian", n)
				}
				spatialtest.UsesIndex(t, pool, tc.index, s.within, s.withinArgs(q)...)
			})
		}
		if s.contains {
			t.Run(tc.table+" contains", func(t *testing.T) {
				spatialtest.UsesIndex(t, pool, tc.index, s.containsQuery, s.containsArgs(geofence.ContainsQuery{Lng: 2.35, Lat: 48.85})...)
			})
		}
	}
}

// TestAntimeridianAndPoles checks answers across the antimeridian and at
// the poles, where the prefilter's boxes split or widen into a band.
func TestAntimeridianAndPoles(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	for _, tc := range []struct {
		set        int // in tableSets
		q          geofence.WithinQuery
		east, west bool // features found on each side of the antimeridian
		minFound   int
	}{
		{set: 0, q: geofence.WithinQuery{Lng: 179.9, Lat: -16.5, Radius: 100_000, Limit: 1000}, east: true, west: true, minFound: 5},
		{set: 0, q: geofence.WithinQuery{Lng: -179.9, Lat: -16.5, Radius: 100_000, Limit: 1000}, east: true, west: true, minFound: 5},
		{set: 2, q: geofence.WithinQuery{Lng: 179.9, Lat: -16.2, Radius: 100_000, Limit: 1000}, east: true, west: true, minFound: 5},
		{set: 0, q: geofence.WithinQuery{Lng: 0, Lat: 89, Radius: 100_000, Limit: 1000}, minFound: 20},
		{set: 0, q: geofence.WithinQuery{Lng: 120, Lat: 89.9999, Radius: 50_000, Limit: 1000}, minFound: 5},
		{set: 0, q: geofence.WithinQuery{Lng: -60, Lat: -89.5, Radius: 100_000, Limit: 1000}, minFound: 20},
		{set: 1, q: geofence.WithinQuery{Lng: 45, Lat: 89, Radius: 100_000, Limit: 1000}, minFound: 20},
		{set: 1, q: geofence.WithinQuery{Lng: 0, Lat: 90, Radius: 100_000, Limit: 1000}, minFound: 20},
		{set: 1, q: geofence.WithinQuery{Lng: 0, Lat: -90, Radius: 100_000, Limit: 1000}},   // Lambert-93 has no south pole
		{set: 1, q: geofence.WithinQuery{Lng: -177, Lat: 45, Radius: 100_000, Limit: 1000}}, // the cone's cut
		{set: 2, q: geofence.WithinQuery{Lng: 0, Lat: 89, Radius: 100_000, Limit: 1000}},
	} {
		ts := tableSets[tc.set]
		t.Run(fmt.Sprintf("%s %+v", ts.cfg.Name, tc.q), func(t *testing.T) {
			s := openSet(t, ts.cfg)
			fs, err := s.Source.Within(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := pool.Query(ctx, fmt.Sprintf(plainWithinSQL, ts.table, ts.id), tc.q.Lng, tc.q.Lat, tc.q.Radius, tc.q.Limit)
			if err != nil {
				t.Fatal(err)
			}
			want, err := pgx.CollectRows(rows, pgx.RowToStructByName[hit])
			if err != nil {
				t.Fatal(err)
			}
			if n := compareWithin(t, "", tc.q, want, hits(t, fs), 1e-9, 1e-7); n > 0 {
				t.Errorf("%d features in one answer only", n)
			}
			if len(fs) < tc.minFound {
				t.Errorf("%d features, want %d or more", len(fs), tc.minFound)
			}
			if tc.east || tc.west {
				east, west := false, false
				q := tc.q
				q.Geometry = true
				fs, err := s.Source.Within(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fs {
					b := f.Geometry.Bound()
					east = east || b.Max[0] > 0
					west = west || b.Min[0] < 0
				}
				if east != tc.east || west != tc.west {
					t.Errorf("features east of the antimeridian %v, west %v", east, west)
				}
			}
		})
	}
}

// TestPoles checks that the prefiltered query itself runs at both poles,
// in Lambert-93 (which has no coordinates for the south pole) and in Web
// Mercator (none for either): its boxes stop short of them.
func TestPoles(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	for _, table := range []string{"test_pgsets.parcels", "test_pgsets.roads"} {
		src := openSet(t, layers.Set{Name: "s", Table: table}).Source.(*source)
		for _, lat := range []float64{-90, 90} {
			q := geofence.WithinQuery{Lng: 0, Lat: lat, Radius: 10_000, Limit: 10}
			rows, err := pool.Query(ctx, src.within, src.withinArgs(q)...)
			if err == nil {
				_, err = pgx.CollectRows(rows, pgx.RowToStructByName[nearRow])
			}
			if err != nil {
				t.Errorf("%s at %v: %v", table, q, err)
			}
		}
	}
}

// TestOutsideProjection checks queries at points a UTM zone has no
// coordinates for (on the equator, 90 degrees from its central meridian):
// within falls back to a query without the prefilter, and agrees with
// plain SQL; contains answers nothing.
func TestOutsideProjection(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	ts := tableSets[3]
	s := openSet(t, ts.cfg)
	src := s.Source.(*source)
	for _, q := range []geofence.WithinQuery{
		{Lng: 105, Lat: 0, Radius: 100_000, Limit: 10},
		{Lng: -75, Lat: 0.3, Radius: 50_000, Limit: 10},
	} {
		t.Run(fmt.Sprint(q), func(t *testing.T) {
			rows, err := pool.Query(ctx, src.within, src.withinArgs(q)...)
			if err == nil {
				_, err = pgx.CollectRows(rows, pgx.RowToStructByName[nearRow])
			}
			if !outsideProjection(err) {
				t.Fatalf("the prefiltered query: %v; want PostGIS's transform error", err)
			}
			fs, err := s.Source.Within(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			rows, err = pool.Query(ctx, fmt.Sprintf(plainWithinSQL, ts.table, ts.id), q.Lng, q.Lat, q.Radius, q.Limit)
			if err != nil {
				t.Fatal(err)
			}
			want, err := pgx.CollectRows(rows, pgx.RowToStructByName[hit])
			if err != nil {
				t.Fatal(err)
			}
			compareWithin(t, "", q, want, hits(t, fs), 1e-9, 1e-7)
			cs, err := s.Source.Contains(ctx, geofence.ContainsQuery{Lng: q.Lng, Lat: q.Lat})
			if err != nil || len(cs) != 0 {
				t.Errorf("contains: %v, %v; want nothing", cs, err)
			}
		})
	}
}
