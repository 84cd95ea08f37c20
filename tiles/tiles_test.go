package tiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

// renderers returns both implementations over the bundled dataset.
func renderers(t testing.TB) map[string]renderer {
	t.Helper()
	pool, d := spatialtest.Loaded(t)
	return map[string]renderer{
		"postgis": NewPostGIS(pool, 5*time.Second),
		"memory":  NewMemory(d),
	}
}

func TestParse(t *testing.T) {
	bundled, err := NewCatalog(Bundled(NewMemory(&dataset.Dataset{}))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		layer, z, x, y string
		field          string // "" for a valid tile
	}{
		{"places", "0", "0", "0", ""},
		{"places", "14", "16383", "0", ""},
		{"counties", "3", "1", "2", ""},
		{"roads", "0", "0", "0", "layer"},
		{"places", "1.5", "0", "0", "z"},
		{"places", "-1", "0", "0", "z"},
		{"places", "15", "0", "0", "z"},
		{"places", "99999999999", "0", "0", "z"},
		{"counties", "2", "0", "0", "z"},
		{"countries", "11", "0", "0", "z"},
		{"places", "2", "4", "0", "x"},
		{"places", "2", "x", "0", "x"},
		{"places", "2", "0", "4", "y"},
		// Plain decimal only: what strconv would also have read.
		{"places", "01", "0", "0", "z"},
		{"places", "1", "00", "0", "x"},
		{"places", "1", "0", "01", "y"},
		{"places", "+1", "0", "0", "z"},
		{"places", "1_0", "0", "0", "z"},
		{"places", "0x1", "0", "0", "z"},
		{"places", "1e1", "0", "0", "z"},
		{"places", " 1", "0", "0", "z"},
		{"places", "", "0", "0", "z"},
		{"places", "2", "-0", "0", "x"},
		{"places", "14", "4294967296", "0", "x"},           // 2^32, which a uint32 would read as 0
		{"places", "14", "0", "18446744073709551616", "y"}, // 2^64
	} {
		t.Run(strings.Join([]string{tc.layer, tc.z, tc.x, tc.y}, ","), func(t *testing.T) {
			l, tile, err := bundled.Parse(tc.layer, tc.z, tc.x, tc.y)
			var fe *param.Error
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.field == "" && (l.Name != tc.layer || fmt.Sprintf("%d,%d,%d", tile.Z, tile.X, tile.Y) != tc.z+","+tc.x+","+tc.y):
				t.Fatalf("got %s %d/%d/%d", l.Name, tile.Z, tile.X, tile.Y)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("error %v, want a *param.Error for %s", err, tc.field)
			}
		})
	}
}

// FuzzParse: any path segments give a tile of the layer that its Validate
// accepts, spelt exactly as it was asked for, or a *param.Error naming the
// layer, z, x or y; never a panic.
func FuzzParse(f *testing.F) {
	f.Add("places", "14", "16383", "0")
	f.Add("counties", "3", "1", "2")
	f.Add("roads", "01", "+1", "1_0")
	f.Add("places", "1e1", "0x1", " 1")
	f.Add("countries", "10", "4294967296", "18446744073709551616")
	bundled, err := NewCatalog(Bundled(NewMemory(&dataset.Dataset{}))...)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, layer, z, x, y string) {
		l, tile, err := bundled.Parse(layer, z, x, y)
		if err != nil {
			var fe *param.Error
			if !errors.As(err, &fe) || !slices.Contains([]string{"layer", "z", "x", "y"}, fe.Field) {
				t.Fatalf("Parse(%q, %q, %q, %q): error %v, want a *param.Error", layer, z, x, y, err)
			}
			return
		}
		if l.Name != layer || l.Validate(tile) != nil {
			t.Fatalf("Parse(%q, %q, %q, %q) = %s %v, which is invalid", layer, z, x, y, l.Name, tile)
		}
		if got := fmt.Sprintf("%d/%d/%d", tile.Z, tile.X, tile.Y); got != z+"/"+x+"/"+y {
			t.Fatalf("Parse(%q, %q, %q, %q) = %s: one tile, two spellings", layer, z, x, y, got)
		}
	})
}

func TestMinPopulation(t *testing.T) {
	places, _ := LookupLayer("places")
	counties, _ := LookupLayer("counties")
	for _, tc := range []struct {
		l    Layer
		z    int
		want int64
	}{
		{places, 0, 1_000_000}, {places, 1, 1_000_000}, {places, 4, 100_000},
		{places, 9, 5_000}, {places, 10, 0}, {places, 14, 0}, {counties, 5, 0},
	} {
		if got := tc.l.MinPopulation(tc.z); got != tc.want {
			t.Errorf("%s at z%d: %d, want %d", tc.l.Name, tc.z, got, tc.want)
		}
	}
}

func TestTileJSON(t *testing.T) {
	l, _ := LookupLayer("counties")
	b, err := json.Marshal(l.TileJSON("https://example.com/tiles/counties/{z}/{x}/{y}.mvt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"tilejson":"3.0.0"`, `"tiles":["https://example.com/tiles/counties/{z}/{x}/{y}.mvt"]`,
		`"minzoom":3`, `"maxzoom":14`, `"vector_layers":[{"id":"counties"`, `"attribution":"Places: `} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	bundled, err := NewCatalog(Bundled(NewMemory(&dataset.Dataset{}))...)
	if err != nil {
		t.Fatal(err)
	}
	c := bundled.Entries("/tiles/{layer}.json")
	if len(c) != 3 || c[0].Name != "places" || c[2].TileJSON != "/tiles/counties.json" {
		t.Errorf("catalog %+v", c)
	}
}

// decode returns the geometries by id of the features of the tile's only layer, which
// must be named after l, and checks that every coordinate lies in the tile
// plus its buffer.
func decode(t *testing.T, l Layer, b []byte) map[uint64]orb.Geometry {
	t.Helper()
	ids := map[uint64]orb.Geometry{}
	if len(b) == 0 {
		return ids
	}
	layers, err := mvt.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || layers[0].Name != l.Name || layers[0].Extent != Extent {
		t.Fatalf("layers %v, want one named %s with extent %d", layers, l.Name, Extent)
	}
	limits := orb.Bound{Min: orb.Point{-Buffer, -Buffer}, Max: orb.Point{Extent + Buffer, Extent + Buffer}}
	for _, f := range layers[0].Features {
		id, ok := f.ID.(float64)
		if !ok || f.Properties["name"] == nil {
			t.Fatalf("feature id %v name %v", f.ID, f.Properties["name"])
		}
		if b := f.Geometry.Bound(); !limits.Contains(b.Min) || !limits.Contains(b.Max) {
			t.Errorf("%s feature %v spans %v, beyond the tile and its buffer", l.Name, f.ID, b)
		}
		ids[uint64(id)] = f.Geometry
	}
	return ids
}

func TestTile(t *testing.T) {
	ctx := context.Background()
	paris := maptile.At(orb.Point{2.3488, 48.85341}, 10)
	la := maptile.At(orb.Point{-118.25, 34.05}, 8)
	for name, r := range renderers(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				layer    string
				tile     maptile.Tile
				want     uint64 // an id in the tile
				min, max int    // bounds on the number of features
			}{
				{"places", maptile.New(0, 0, 0), 2988507, 300, 1000},
				{"places", paris, 2988507, 10, 1000},
				{"countries", maptile.New(0, 0, 0), 75, 150, 241}, // France is country 75
				{"counties", la, 6037, 3, 30},                     // Los Angeles
				{"counties", maptile.New(0, 0, 3), 0, 0, 0},       // the Pacific
				{"places", maptile.New(8192, 8192, 14), 0, 0, 0},  // the Gulf of Guinea
			} {
				t.Run(tc.layer, func(t *testing.T) {
					l, err := LookupLayer(tc.layer)
					if err != nil {
						t.Fatal(err)
					}
					b, err := r.Tile(ctx, l, tc.tile)
					if err != nil {
						t.Fatal(err)
					}
					ids := decode(t, l, b)
					if len(ids) < tc.min || len(ids) > tc.max || (tc.want != 0 && ids[tc.want] == nil) {
						t.Errorf("%v: %d features, want %d to %d including %d", tc.tile, len(ids), tc.min, tc.max, tc.want)
					}
				})
			}
			l, _ := LookupLayer("counties")
			_, err := r.Tile(ctx, l, maptile.New(0, 0, 1))
			var fe *param.Error
			if !errors.As(err, &fe) || fe.Field != "z" {
				t.Errorf("z1 counties: error %v, want one for z", err)
			}
		})
	}
}

func TestPostGISTimeout(t *testing.T) {
	pool, _ := spatialtest.Loaded(t)
	l, _ := LookupLayer("countries")
	_, err := NewPostGIS(pool, time.Millisecond).Tile(context.Background(), l, maptile.New(0, 0, 0))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("error %v, want a statement timeout (57014)", err)
	}
}

// TestExplainUsesIndex checks that tile queries find their rows through the
// GiST indexes on the Web Mercator geometries.
func TestExplainUsesIndex(t *testing.T) {
	pool, _ := spatialtest.Loaded(t)
	margin := float64(Buffer) / Extent
	paris := maptile.At(orb.Point{2.3488, 48.85341}, 14)
	la := maptile.At(orb.Point{-118.25, 34.05}, 10)
	for _, tc := range []struct {
		name, sql, index string
		args             []any
	}{
		{"places z14", placesFrom("places"), "places_geom_3857_idx", []any{14, int(paris.X), int(paris.Y), margin, Extent, Buffer, int64(0), 1000, "places"}},
		{"counties z10", fencesSQL, "fences_geom_3857_idx", []any{10, int(la.X), int(la.Y), margin, Extent, Buffer, Tolerance(10), "county", 4000, "counties", lowZoom}},
	} {
		t.Run(tc.name, func(t *testing.T) { spatialtest.UsesIndex(t, pool, tc.index, tc.sql, tc.args...) })
	}
}

// TestLowZoomTolerance checks that migration 00002 simplifies the fences'
// low-zoom copy to the tolerance the renderers expect.
func TestLowZoomTolerance(t *testing.T) {
	pool, _ := spatialtest.Loaded(t)
	var expr string
	err := pool.QueryRow(context.Background(), `
SELECT pg_get_expr(d.adbin, d.adrelid)
FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
WHERE d.adrelid = 'fences'::regclass AND a.attname = 'geom_3857_low'`).Scan(&expr)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatFloat(Tolerance(lowZoom), 'g', -1, 64); !strings.Contains(expr, want) {
		t.Errorf("geom_3857_low is %s, want a tolerance of %s", expr, want)
	}
}
