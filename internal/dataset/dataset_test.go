package dataset_test

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/planar"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/validators/geojsoncheck"
)

func TestLoad(t *testing.T) {
	d, err := dataset.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(d.Places), 135233; got != want {
		t.Errorf("places: %d, want %d", got, want)
	}
	count := map[dataset.Kind]int{}
	byName := map[string]dataset.Fence{}
	for _, f := range d.Fences {
		count[f.Kind]++
		if f.Kind == dataset.Country {
			byName[f.Name] = f
		}
	}
	if count[dataset.Country] != 241 || count[dataset.County] != 3231 {
		t.Errorf("fences: %v, want 241 countries and 3231 counties", count)
	}
	for _, tc := range []struct {
		name, code string
	}{
		{"Australia", "036"},
		{"Ashmore and Cartier Is.", "036"},
		{"Kosovo", ""},
		{"United States of America", "840"},
	} {
		f, ok := byName[tc.name]
		if !ok || f.Code != tc.code {
			t.Errorf("country %q: %+v, want code %q", tc.name, f.Code, tc.code)
		}
	}
	if byName["Afghanistan"].ID != 1 {
		t.Errorf("Afghanistan has id %d, want 1", byName["Afghanistan"].ID)
	}
}

func TestReadPlaces(t *testing.T) {
	for _, tc := range []struct {
		name, csv, err string
		want           dataset.Place
	}{
		{
			name: "quoted name",
			csv:  "geonameid,name,country,admin_code,feature_code,population,lon,lat\n6292397,\"Rüti / Dorfzentrum, Südl. Teil\",CH,ZH,PPLX,3618,8.85654,47.25368\n",
			want: dataset.Place{ID: 6292397, Name: "Rüti / Dorfzentrum, Südl. Teil", Country: "CH", AdminCode: "ZH", FeatureCode: "PPLX", Population: 3618, Point: [2]float64{8.85654, 47.25368}},
		},
		{name: "bad header", csv: "id,name\n1,x\n", err: "header"},
		{name: "bad population", csv: "geonameid,name,country,admin_code,feature_code,population,lon,lat\n1,a,FR,11,PPL,many,1,2\n", err: "line 2: population"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dataset.ReadPlaces(strings.NewReader(tc.csv))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0] != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestAntimeridian checks that Russia and Fiji are cut at the antimeridian
// instead of spanning the map, and that Antarctica covers the South Pole.
func TestAntimeridian(t *testing.T) {
	d, err := dataset.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Fences {
		if f.Name == "Antarctica" {
			for _, pt := range []orb.Point{{0, -89.99}, {0, -80}, {179.9, -85}, {-179.9, -85}} {
				if !planar.MultiPolygonContains(f.Geometry, pt) {
					t.Errorf("Antarctica does not contain %v", pt)
				}
			}
		}
		if f.Name != "Russia" && f.Name != "Fiji" {
			continue
		}
		for _, p := range f.Geometry {
			b := p.Bound()
			if b.Max[0]-b.Min[0] > 180 || b.Min[0] < -180 || b.Max[0] > 180 {
				t.Errorf("%s has a polygon spanning %v", f.Name, b)
			}
		}
	}
}

// TestRightHanded checks every ring of every fence as RFC 7946 wants it:
// exteriors counter-clockwise, holes clockwise, none of no area, positions
// in range (issue 21: all were clockwise, and the antimeridian cut left
// slivers of no area beside Antarctica).
func TestRightHanded(t *testing.T) {
	d, err := dataset.Load()
	if err != nil {
		t.Fatal(err)
	}
	rings, defects := 0, 0
	for _, f := range d.Fences {
		for _, p := range f.Geometry {
			rings += len(p)
		}
		for _, msg := range geojsoncheck.Polygons(f.Geometry) {
			if defects++; defects <= 10 {
				t.Errorf("%s %d %s: %s", f.Kind, f.ID, f.Name, msg)
			}
		}
	}
	t.Logf("%d fences, %d rings, %d defects", len(d.Fences), rings, defects)
}

func TestLoadFrom(t *testing.T) {
	var counties bytes.Buffer
	zw := gzip.NewWriter(&counties)
	zw.Write([]byte(`{"type":"FeatureCollection","features":[{"type":"Feature","id":"99001","properties":{"name":"Square"},` +
		`"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}}]}`))
	zw.Close()
	d, err := dataset.LoadFrom(dataset.Sources{
		Places: &dataset.Source{Name: "mine.csv", R: strings.NewReader(
			"geonameid,name,country,admin_code,feature_code,population,lon,lat\n1,One,XX,01,PPL,10,0.5,0.5\n")},
		Counties: &dataset.Source{Name: "mine.geojson.gz", R: &counties},
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[dataset.Kind]int{}
	for _, f := range d.Fences {
		kinds[f.Kind]++
	}
	if len(d.Places) != 1 || kinds[dataset.Country] != 241 || kinds[dataset.County] != 1 {
		t.Errorf("%d places, %v fences; want 1 place, 241 countries, 1 county", len(d.Places), kinds)
	}

	_, err = dataset.LoadFrom(dataset.Sources{Countries: &dataset.Source{Name: "bad.geojson", R: strings.NewReader("{")}})
	if err == nil || !strings.Contains(err.Error(), "bad.geojson") {
		t.Errorf("error %v, want one naming bad.geojson", err)
	}
}
