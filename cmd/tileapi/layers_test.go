package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/validators/mvtcheck"
	"github.com/tileapi/tileapi/internal/validators/mvtdecode"
	"github.com/tileapi/tileapi/internal/validators/pmtilescheck"
)

// storesGeoJSON is a file of the operator's own: three shops in Paris.
const storesGeoJSON = `{"type": "FeatureCollection", "features": [
 {"type": "Feature", "id": 1, "properties": {"name": "Rivoli", "open": true, "floors": 3},
  "geometry": {"type": "Point", "coordinates": [2.3522, 48.8566]}},
 {"type": "Feature", "id": 2, "properties": {"name": "Bastille", "open": false, "floors": 1},
  "geometry": {"type": "Point", "coordinates": [2.3690, 48.8532]}},
 {"type": "Feature", "id": 3, "properties": {"name": "Defense", "open": true, "floors": 12},
  "geometry": {"type": "Point", "coordinates": [2.2380, 48.8920]}}]}`

// ownData writes a layers file naming a GeoJSON file (stores) and a
// FlatGeobuf one (the countries fixture), as layers and as geofence sets,
// with the layers extraLayers lists after those, and returns its path.
func ownData(t *testing.T, extraLayers string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stores.geojson"), []byte(storesGeoJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	fgb, err := filepath.Abs("../../internal/featurefile/testdata/countries.fgb")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "layers.yaml")
	body := `layers:
  - name: stores
    file: stores.geojson
    description: Our shops
    attribution: "© Example Shops"
    properties: [name, open]
  - name: small-countries
    file: ` + fgb + `
    maxzoom: 12
` + extraLayers + `geofences:
  - name: shops
    file: stores.geojson
  - name: zones
    file: ` + fgb + "\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func get(t *testing.T, url, key string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// With no database, a layers file's GeoJSON and FlatGeobuf files are
// served as tile layers and geofence sets beside the bundled data, priced
// by the compiled-in plans ("*"), and a layer exported to a PMTiles archive
// serves the same tiles from the archive.
func TestServeOwnFiles(t *testing.T) {
	layersFile := ownData(t, "")
	in := startServe(t, map[string]string{"TILEAPI_LAYERS_FILE": layersFile})
	if !strings.Contains(in.stderr.String(), "serving your own layers and geofence sets") {
		t.Errorf("startup log says nothing of the layers file:\n%s", in.stderr)
	}

	// A tile of the stores: the three shops, with the properties named.
	tile := maptile.At([2]float64{2.3522, 48.8566}, 10)
	resp, body := get(t, in.url+tilePath("stores", tile), "demo-free")
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Cost") != "16" {
		t.Fatalf("stores tile: %d, cost %q: %s", resp.StatusCode, resp.Header.Get("X-RateLimit-Cost"), body)
	}
	layers, err := mvt.Unmarshal(body)
	if err != nil || len(layers) != 1 || layers[0].Name != "stores" {
		t.Fatalf("stores tile: %v %v", layers, err)
	}
	var ids []uint64
	for _, f := range layers[0].Features {
		id, _ := f.ID.(float64) // orb decodes an MVT id as a float64
		ids = append(ids, uint64(id))
		if _, ok := f.Properties["floors"]; ok || f.Properties["name"] == nil {
			t.Errorf("feature %v: properties %v, want name and open only", f.ID, f.Properties)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []uint64{1, 2, 3}) {
		t.Errorf("stores tile ids %v, want 1 2 3", ids)
	}
	decoded := mvtdecode.Decode(t, map[string][]byte{"stores.mvt": body})["stores.mvt"]
	if fs := decoded["stores"].Features; len(fs) != 3 || fs[0].ID == nil || fs[0].Properties["name"] == nil {
		t.Errorf("@mapbox/vector-tile reads the stores tile as %+v", decoded)
	}

	// TileJSON of the own layer: its attribution, fields and bounds.
	resp, body = get(t, in.url+"/v1/tiles/stores.json", "demo-free")
	var tj struct {
		Attribution  string     `json:"attribution"`
		Bounds       [4]float64 `json:"bounds"`
		VectorLayers []struct {
			ID     string            `json:"id"`
			Fields map[string]string `json:"fields"`
		} `json:"vector_layers"`
	}
	if err := json.Unmarshal(body, &tj); err != nil || resp.StatusCode != 200 {
		t.Fatalf("TileJSON: %d %s", resp.StatusCode, body)
	}
	if tj.Attribution != "© Example Shops" || tj.Bounds[0] != 2.238 || len(tj.VectorLayers) != 1 ||
		tj.VectorLayers[0].Fields["name"] != "String" || tj.VectorLayers[0].Fields["open"] != "Boolean" {
		t.Errorf("TileJSON %s", body)
	}

	// The geofence sets: the nearest shops, and the country containing a point.
	resp, body = get(t, in.url+"/v1/geofence/shops/within?lng=2.35&lat=48.856&radius=2000", "demo-free")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"Rivoli"`) || !strings.Contains(string(body), `"Bastille"`) ||
		strings.Contains(string(body), `"Defense"`) {
		t.Errorf("shops within: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, in.url+"/v1/geofence/zones/contains?lng=28.2&lat=-29.6", "demo-free")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"Lesotho"`) || strings.Contains(string(body), `"Italy"`) {
		t.Errorf("zones contains: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, in.url+"/v1/geofence/shops/contains?lng=2.35&lat=48.856", "demo-free")
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"field":"set"`) {
		t.Errorf("contains of points: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, in.url+"/v1/geofence", "demo-free")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"zones"`) {
		t.Errorf("sets: %d %s", resp.StatusCode, body)
	}
	// The served OpenAPI document names them.
	_, body = get(t, in.url+"/openapi.json", "")
	if !strings.Contains(string(body), `"stores"`) || !strings.Contains(string(body), `"zones"`) {
		t.Error("openapi.json does not name the layers file's layers and sets")
	}

	// Exported to an archive, read back by the reference reader, and served.
	archive := filepath.Join(t.TempDir(), "countries.pmtiles")
	var out bytes.Buffer
	getenv := func(k string) string { return map[string]string{"TILEAPI_LAYERS_FILE": layersFile}[k] }
	if err := run(context.Background(), []string{"tileapi", "export", "-layer", "small-countries", "-zoom", "0-6", "-o", archive, "-quiet"}, getenv, &out, &out); err != nil {
		t.Fatalf("export: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "wrote "+archive) {
		t.Errorf("export printed %q", &out)
	}
	vatican := maptile.At([2]float64{12.45, 41.9035}, 6)
	fiji := maptile.At([2]float64{178.0, -17.8}, 4)
	report := pmtilescheck.Check(t, archive, [][3]uint32{{6, vatican.X, vatican.Y}, {4, fiji.X, fiji.Y}, {0, 0, 0}})
	if report.Header.MinZoom != 0 || report.Header.MaxZoom != 6 || report.Header.TileType != 1 {
		t.Errorf("archive header %+v", report.Header)
	}
	withArchive := ownData(t, "  - name: countries-archive\n    pmtiles: "+archive+"\n")
	served := startServe(t, map[string]string{"TILEAPI_LAYERS_FILE": withArchive})
	for i, tl := range []maptile.Tile{vatican, fiji, maptile.New(0, 0, 0)} {
		_, fromFile := get(t, served.url+tilePath("small-countries", tl), "demo-pro")
		_, fromArchive := get(t, served.url+tilePath("countries-archive", tl), "demo-pro")
		sum := sha256.Sum256(fromFile)
		if len(fromFile) == 0 || !bytes.Equal(fromFile, fromArchive) || report.Tiles[i].SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("tile %v: %d bytes from the file layer, %d from the archive, reference reader %s", tl, len(fromFile), len(fromArchive), report.Tiles[i].SHA256)
		}
		if r := mvtcheck.Check(t, []mvtcheck.Tile{{Name: "t.mvt", Data: fromArchive}}); r.Polygons == 0 || len(r.Defects) > 0 {
			t.Errorf("tile %v: %d polygons, defects %v", tl, r.Polygons, r.Defects)
		}
	}
	_, body = get(t, served.url+"/v1/tiles/countries-archive.json", "demo-pro")
	if !strings.Contains(string(body), `"vector_layers":[{"id":"small-countries"`) || !strings.Contains(string(body), `"maxzoom":6`) {
		t.Errorf("archive TileJSON: %s", body)
	}
}

func tilePath(layer string, t maptile.Tile) string {
	return fmt.Sprintf("/v1/tiles/%s/%d/%d/%d.mvt", layer, t.Z, t.X, t.Y)
}
