package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/export"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/pmtiles"
	"github.com/tileapi/tileapi/internal/sources"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/tiles"
)

func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

// citiesGeoJSON is a points file of the operator's own: seven cities of
// Italy, San Marino and the Vatican, and two far away.
const citiesGeoJSON = `{"type": "FeatureCollection", "features": [
 {"type": "Feature", "id": 1, "properties": {"name": "Rome", "capital": true}, "geometry": {"type": "Point", "coordinates": [12.4964, 41.9028]}},
 {"type": "Feature", "id": 2, "properties": {"name": "St. Peter's", "capital": true}, "geometry": {"type": "Point", "coordinates": [12.4534, 41.9022]}},
 {"type": "Feature", "id": 3, "properties": {"name": "San Marino", "capital": true}, "geometry": {"type": "Point", "coordinates": [12.4469, 43.9367]}},
 {"type": "Feature", "id": 4, "properties": {"name": "Florence", "capital": false}, "geometry": {"type": "Point", "coordinates": [11.2558, 43.7696]}},
 {"type": "Feature", "id": 5, "properties": {"name": "Milan", "capital": false}, "geometry": {"type": "Point", "coordinates": [9.1900, 45.4642]}},
 {"type": "Feature", "id": 6, "properties": {"name": "Naples", "capital": false}, "geometry": {"type": "Point", "coordinates": [14.2681, 40.8518]}},
 {"type": "Feature", "id": 7, "properties": {"name": "Palermo", "capital": false}, "geometry": {"type": "Point", "coordinates": [13.3615, 38.1157]}},
 {"type": "Feature", "id": 8, "properties": {"name": "Maseru", "capital": true}, "geometry": {"type": "Point", "coordinates": [27.4833, -29.3167]}},
 {"type": "Feature", "id": 9, "properties": {"name": "Suva", "capital": true}, "geometry": {"type": "Point", "coordinates": [178.4419, -18.1416]}}]}`

// The countries fixture (Italy, San Marino, the Vatican, Lesotho, Fiji) as
// FlatGeobuf, and as the GeoJSON GDAL made it from, loaded into a table.
const (
	countriesFGB     = "../featurefile/testdata/countries.fgb"
	countriesGeoJSON = "../featurefile/testdata/countries.geojson"
)

// ownCountriesSQL makes the table the countries are loaded into: an
// operator's own polygons, with a spatial index.
const ownCountriesSQL = `
CREATE TABLE own_countries (id integer PRIMARY KEY, name text NOT NULL, geom geometry(MultiPolygon, 4326) NOT NULL);
CREATE INDEX ON own_countries USING gist (geom)`

// insertCountriesSQL loads the features of a GeoJSON FeatureCollection
// ($1) into own_countries, PostGIS reading the geometries.
const insertCountriesSQL = `
INSERT INTO own_countries (id, name, geom)
SELECT (f->>'id')::integer, f->'properties'->>'name', ST_Multi(ST_SetSRID(ST_GeomFromGeoJSON(f->'geometry'), 4326))
FROM jsonb_array_elements($1::jsonb->'features') AS f`

// The operator's layers: the cities (GeoJSON) and the countries from the
// FlatGeobuf file, from a PMTiles archive exported from that file's layer,
// and from a PostGIS table.
const (
	citiesLayer    = "cities"
	fileLayer      = "countries-fgb"
	archiveLayer   = "countries-pmtiles"
	tableLayer     = "countries-table"
	archiveMaxZoom = 8
)

// archiveBounds is the area exported into the archive: every view below,
// so that MapLibre asks the archive for the tiles it asks the file for.
var archiveBounds = orb.Bound{Min: orb.Point{0, 33}, Max: orb.Point{25, 50}}

// TestMapLibreOwnLayers draws the operator's own layers with MapLibre GL
// JS, each source from its TileJSON, on a key of the compiled-in free plan
// with its compiled-in prices (its "*" prices own layers): points from a
// GeoJSON file, and countries from a FlatGeobuf file, from a PMTiles
// archive that tileapi export wrote from that file's layer, and from a
// PostGIS table, opened by sources.Open as serve opens a layers file. Each
// view over Italy (zoom 5, and Rome at zoom 8) is drawn once for each
// source of countries, with the cities, on a fresh server: it must load
// every tile it asks for (every response a 200, no error of the map or in
// the console) and draw the countries and cities in view, and none other.
// The archive must draw the very features the file draws.
func TestMapLibreOwnLayers(t *testing.T) {
	ctx, c := newMapLibre(t)
	p := openOwnLayers(t)
	empty := &dataset.Dataset{} // the bundled layers, beside, hold nothing
	shots := screenshotDir(t)
	for _, v := range []struct {
		name      string
		lng, lat  float64
		zoom      int
		countries []string
		cities    []string
	}{
		// At zoom 5 the Vatican, 1 km across, is 3 units of a tile's 4096:
		// too small to draw, in the file's tiles as in PostGIS's.
		{"italy", 12.5, 42, 5, []string{"Italy", "San Marino"},
			[]string{"Florence", "Milan", "Naples", "Palermo", "Rome", "San Marino", "St. Peter's"}},
		{"rome", 12.5, 41.9, 8, []string{"Italy", "Vatican"}, []string{"Rome", "St. Peter's"}},
	} {
		drawn := map[string][]string{} // of each source of countries
		for _, countries := range []string{fileLayer, archiveLayer + "/" + fileLayer, tableLayer} {
			layer, _, _ := strings.Cut(countries, "/")
			t.Run(fmt.Sprintf("%s/z%d/%s", v.name, v.zoom, layer), func(t *testing.T) {
				q := url.Values{"lng": {fmt.Sprint(v.lng)}, "lat": {fmt.Sprint(v.lat)}, "zoom": {strconv.Itoa(v.zoom)}, "key": {"map-free"},
					"layers": {"fill:" + countries + ",circle:" + citiesLayer}}
				st := firstView(t, ctx, c, mapLibreService(t, empty, p.Layers, p.Sets), q,
					filepath.Join(shots, fmt.Sprintf("maplibre-own-%s-z%d-%s.png", v.name, v.zoom, layer)))
				t.Logf("first view of %s at zoom %d with %s: %s", v.name, v.zoom, layer, st)
				if st.perLayer[layer] == 0 || st.perLayer[citiesLayer] == 0 {
					t.Errorf("tiles asked for %v; want tiles of %s and %s", st.perLayer, layer, citiesLayer)
				}
				got := evaluate[map[string][]renderedFeature](t, ctx, fmt.Sprintf(renderedFeaturesJS, citiesLayer, layer))
				if names := featureNames(got[layer]); !slices.Equal(names, v.countries) {
					t.Errorf("%s drawn: %q, want %q", layer, names, v.countries)
				}
				if names := featureNames(got[citiesLayer]); !slices.Equal(names, v.cities) {
					t.Errorf("%s drawn: %q, want %q", citiesLayer, names, v.cities)
				}
				drawn[layer] = featureTexts(t, got[layer])
			})
		}
		file, archive := drawn[fileLayer], drawn[archiveLayer]
		switch {
		case file == nil || archive == nil: // a subtest failed before
		case slices.Equal(file, archive):
			t.Logf("%s at zoom %d: the archive draws the file's %d features (parts of tiles)", v.name, v.zoom, len(file))
		default:
			t.Errorf("%s at zoom %d: the archive draws %d features (parts of tiles), the file %d, not the same:\narchive %.2000s\nfile    %.2000s",
				v.name, v.zoom, len(archive), len(file), archive, file)
		}
	}
}

// renderedFeaturesJS returns, for each of the two style layers it names,
// the features MapLibre drew in the view.
const renderedFeaturesJS = `Object.fromEntries([%q, %q].map(l => [l,
	map.queryRenderedFeatures({layers: [l]}).map(f => ({id: f.id, properties: f.properties, geometry: f.geometry}))]))`

// renderedFeature is one feature queryRenderedFeatures returns: a part of
// a feature in one tile.
type renderedFeature struct {
	ID         any             `json:"id"`
	Properties map[string]any  `json:"properties"`
	Geometry   json.RawMessage `json:"geometry"`
}

// featureNames returns the names of fs, sorted, each once.
func featureNames(fs []renderedFeature) []string {
	names := map[string]bool{}
	for _, f := range fs {
		name, _ := f.Properties["name"].(string)
		names[name] = true
	}
	return slices.Sorted(maps.Keys(names))
}

// featureTexts returns fs as JSON, sorted.
func featureTexts(t *testing.T, fs []renderedFeature) []string {
	t.Helper()
	texts := make([]string, len(fs))
	for i, f := range fs {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[i] = string(b)
	}
	slices.Sort(texts)
	return texts
}

// openOwnLayers opens the operator's layers as serve opens a layers file,
// and checks that the compiled-in plans price them all: the cities and
// the countries file, an archive of the countries exported from the
// file's layer, and a table of them in a PostGIS schema of the test's.
func openOwnLayers(t *testing.T) sources.Published {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cities.geojson"), []byte(citiesGeoJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	fgb, err := filepath.Abs(countriesFGB)
	if err != nil {
		t.Fatal(err)
	}
	files := []layers.Layer{{Name: citiesLayer, File: "cities.geojson"}, {Name: fileLayer, File: fgb}}
	exportArchive(t, filepath.Join(dir, "countries.pmtiles"), openSources(t, sources.Options{File: layers.File{Layers: files}, Dir: dir}))

	f := layers.File{Layers: append(files,
		layers.Layer{Name: archiveLayer, PMTiles: "countries.pmtiles"},
		layers.Layer{Name: tableLayer, Table: "own_countries"})}
	p := openSources(t, sources.Options{File: f, Dir: dir, Pool: ownCountries(t), QueryTimeout: 30 * time.Second})
	if err := plans.Defaults().CheckLayers(p.Layers.Names(), p.Sets.Names()); err != nil {
		t.Fatal(err)
	}
	return p
}

// openSources opens o's sources beside empty bundled layers and sets, closed
// when t ends.
func openSources(t *testing.T, o sources.Options) sources.Published {
	t.Helper()
	empty := &dataset.Dataset{}
	o.BundledTiles, o.BundledSets = tiles.NewMemory(empty), geofence.NewMemory(empty)
	p, err := sources.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// exportArchive writes the countries file layer of p, zooms 0 to
// archiveMaxZoom over archiveBounds, into a PMTiles archive at path, as
// tileapi export does.
func exportArchive(t *testing.T, path string, p sources.Published) {
	t.Helper()
	l, err := p.Layers.Lookup(fileLayer)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w, err := pmtiles.NewWriter(out, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, err := export.Archive(context.Background(), l, export.Options{MaxZoom: archiveMaxZoom, Bounds: archiveBounds}, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("exported %s: %d tiles, %d empty, %d bytes", fileLayer, st.Tiles, st.Empty, st.Bytes)
}

// ownCountries loads the countries into the table own_countries of a
// schema of the test's own, dropped when it ends, and returns a pool on it.
func ownCountries(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, spatialtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	features, err := os.ReadFile(countriesGeoJSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, ownCountriesSQL); err != nil {
		t.Fatal(err)
	}
	tag, err := pool.Exec(ctx, insertCountriesSQL, string(features))
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 5 {
		t.Fatalf("own_countries: %d rows, want the fixture's 5", tag.RowsAffected())
	}
	return pool
}
