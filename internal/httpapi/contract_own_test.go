package httpapi

import (
	"io"
	"net/http"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/tiles"
)

// ownFeatures are an operator's own: two shops (points) and a district
// (a polygon), as a layers file's GeoJSON would give them.
func ownFeatures() (shops, districts []*geojson.Feature) {
	for i, p := range []orb.Point{{2.3522, 48.8566}, {2.3690, 48.8532}} {
		f := geojson.NewFeature(p)
		f.ID = float64(i + 1)
		f.Properties = geojson.Properties{"name": []string{"Rivoli", "Bastille"}[i], "open": i == 0}
		shops = append(shops, f)
	}
	d := geojson.NewFeature(orb.Polygon{{{2.2, 48.8}, {2.5, 48.8}, {2.5, 48.95}, {2.2, 48.95}, {2.2, 48.8}}})
	d.ID = float64(10)
	d.Properties = geojson.Properties{"label": "centre"}
	return shops, []*geojson.Feature{d}
}

// withOwnData serves the bundled layers and sets and an operator's own: a
// layer and a set of points, a set of polygons.
func withOwnData(t *testing.T, c *Config) {
	shops, districts := ownFeatures()
	ls := append(tiles.Bundled(c.Tiles), tiles.Layer{
		Name: "shops", Description: "Our shops", Attribution: "© Example", MinZoom: 0, MaxZoom: 22, MaxFeatures: 100,
		Fields: map[string]string{"name": "String", "open": "Boolean"}, Source: tiles.NewFeatures("shops", shops, 100),
	})
	var err error
	if c.Layers, err = tiles.NewCatalog(ls...); err != nil {
		t.Fatal(err)
	}
	shopSet, err := geofence.NewFileSet("shops", "Our shops", shops, nil)
	if err != nil {
		t.Fatal(err)
	}
	districtSet, err := geofence.NewFileSet("districts", "Our districts", districts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sets, err = geofence.NewSets(append(geofence.Bundled(c.Geofence), shopSet, districtSet)...); err != nil {
		t.Fatal(err)
	}
}

// A server with a layers file's layers and sets answers as the OpenAPI
// document it serves says: the document names its layers and sets, and
// refuses what the server refuses (contains of a set of points, a layer
// or set it does not have).
func TestContractOwnData(t *testing.T) {
	e := newEnv(t, withOwnData)
	resp := e.get(t, "/openapi.json")
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/openapi.json: %d %v", resp.StatusCode, err)
	}
	c := loadContractFrom(t, served)
	for _, x := range []exchange{
		get("/v1/geofence", 200).key("std"),
		get("/v1/geofence/shops/within?lng=2.35&lat=48.856&radius=2000", 200).key("std"),
		get("/v1/geofence/districts/within?lng=2.35&lat=48.856&radius=2000&geometry=true", 200).key("std"),
		get("/v1/geofence/districts/contains?lng=2.35&lat=48.856", 200).key("std"),
		get("/v1/geofence/districts/contains?lng=2.35&lat=48.856&geometry=true", 200).key("std"),
		get("/v1/tiles", 200).key("std"),
		get("/v1/tiles/shops.json", 200).key("std"),
		get("/v1/tiles/shops/12/2074/1409.mvt", 200).key("std"),
		{method: "GET", path: "/v1/geofence/shops/contains?lng=2.35&lat=48.856", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/parcels/within?lng=2.35&lat=48.856&radius=10", status: 400, refused: true},
		{method: "GET", path: "/v1/tiles/parcels/0/0/0.mvt", status: 400, refused: true},
	} {
		c.both(t, e, x)
	}
}
