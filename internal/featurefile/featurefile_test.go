package featurefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/planar"
)

// TestFlatGeobufMatchesGeoJSON loads each FlatGeobuf fixture, written by
// GDAL from the GeoJSON beside it, and compares it with that GeoJSON loaded.
func TestFlatGeobufMatchesGeoJSON(t *testing.T) {
	for _, tc := range []struct {
		name, geometryType string
		features           int
	}{
		{"points", "Point", 5},
		{"lines", "Geometry", 3},
		{"polygons", "Polygon", 3},
		{"multipolygons", "MultiPolygon", 2},
		{"mixed", "Geometry", 4},
		{"countries", "Geometry", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := mustLoad(t, filepath.Join("testdata", tc.name+".geojson"))
			got := mustLoad(t, filepath.Join("testdata", tc.name+".fgb"))
			if len(want.Features) != tc.features || got.GeometryType != tc.geometryType || want.GeometryType != tc.geometryType {
				t.Fatalf("%d features of %s (GeoJSON: %s), want %d of %s",
					len(want.Features), got.GeometryType, want.GeometryType, tc.features, tc.geometryType)
			}
			if len(got.Fields) > 0 && got.Fields[0].Name == "id" {
				// GDAL made the GeoJSON's string ids a column.
				want.Fields = append([]Field{{"id", "String"}}, want.Fields...)
				for _, f := range want.Features {
					f.Properties["id"], f.ID = f.ID, nil
				}
			}
			if !reflect.DeepEqual(got.Fields, want.Fields) {
				t.Errorf("fields %v, want %v", got.Fields, want.Fields)
			}
			if !near(got.Bounds.Min, want.Bounds.Min) || !near(got.Bounds.Max, want.Bounds.Max) {
				t.Errorf("bounds %v, want %v", got.Bounds, want.Bounds)
			}
			// With a spatial index, GDAL writes features in Hilbert order.
			byName := func(a, b *geojson.Feature) int {
				return strings.Compare(a.Properties.MustString("name"), b.Properties.MustString("name"))
			}
			slices.SortFunc(got.Features, byName)
			slices.SortFunc(want.Features, byName)
			if len(got.Features) != len(want.Features) {
				t.Fatalf("%d features, want %d", len(got.Features), len(want.Features))
			}
			for i, g := range got.Features {
				w := want.Features[i]
				if !sameGeometry(g.Geometry, w.Geometry) {
					t.Errorf("%s: geometry %v, want %v", w.Properties["name"], g.Geometry, w.Geometry)
				}
				if !reflect.DeepEqual(asGDAL(g.Properties), asGDAL(w.Properties)) || g.ID != nil || w.ID != nil {
					t.Errorf("%s: properties %#v id %v, want %#v id %v", w.Properties["name"], g.Properties, g.ID, w.Properties, w.ID)
				}
			}
		})
	}
}

// TestLoadGeoJSON checks what the GeoJSON reader makes of values, ids and
// geometries, against values written out here.
func TestLoadGeoJSON(t *testing.T) {
	c := mustLoad(t, "testdata/points.geojson")
	wantFields := []Field{{"name", "String"}, {"population", "Number"}, {"area", "Number"},
		{"capital", "Boolean"}, {"note", "String"}, {"tags", "String"}}
	if !reflect.DeepEqual(c.Fields, wantFields) {
		t.Errorf("fields %v, want %v", c.Fields, wantFields)
	}
	for i, want := range []geojson.Properties{
		{"name": "Paris", "population": int64(2148000), "area": 105.4, "capital": true},
		{"name": "Lyon", "population": int64(513275), "area": 47.87, "capital": false, "note": "second city"},
		{"name": "Suva", "population": int64(93970), "area": 2048.0, "capital": true, "tags": `{"country":"Fiji","ports":[1,2]}`},
	} {
		if got := c.Features[i].Properties; !reflect.DeepEqual(got, want) {
			t.Errorf("feature %d: %#v, want %#v", i, got, want)
		}
	}
	if want := (orb.Bound{Min: orb.Point{-180, -54.8019}, Max: orb.Point{178.4419, 90}}); c.Bounds != want {
		t.Errorf("bounds %v, want %v", c.Bounds, want)
	}

	mixed := mustLoad(t, "testdata/mixed.geojson")
	if kind := mixed.Features[1].Properties["kind"]; kind != "3" || mixed.Fields[1] != (Field{"kind", "String"}) {
		t.Errorf("a property both string and number: %#v as %v, want \"3\" as a String", kind, mixed.Fields[1])
	}

	// Polygons keep their rings and their winding as read.
	p := mustLoad(t, "testdata/polygons.geojson")
	if holes := p.Features[1].Geometry.(orb.Polygon); len(holes) != 3 {
		t.Errorf("%d rings, want 3", len(holes))
	}
	if cw := p.Features[2].Geometry.(orb.Polygon)[0]; cw.Orientation() != orb.CW {
		t.Errorf("clockwise ring rewound: %v", cw)
	}
	if ccw := p.Features[0].Geometry.(orb.Polygon)[0]; ccw.Orientation() != orb.CCW {
		t.Errorf("counter-clockwise ring rewound: %v", ccw)
	}

	for _, tc := range []struct {
		name, json string
		id         any
		props      geojson.Properties
		geometry   orb.Geometry
	}{
		{"number id", `{"type":"Feature","id":7,"geometry":{"type":"Point","coordinates":[1,2,30]},"properties":{"a":1.5}}`,
			int64(7), geojson.Properties{"a": 1.5}, orb.Point{1, 2}},
		{"string id", `{"type":"Feature","id":"x7","geometry":{"type":"Point","coordinates":[1,2]},"properties":null}`,
			"x7", geojson.Properties{}, orb.Point{1, 2}},
		{"object id", `{"type":"Feature","id":{"a":1},"geometry":{"type":"Point","coordinates":[1,2]}}`,
			nil, geojson.Properties{}, orb.Point{1, 2}},
		{"bare geometry", `{"type":"LineString","coordinates":[[1,2],[3,4]]}`,
			nil, geojson.Properties{}, orb.LineString{{1, 2}, {3, 4}}},
		{"array, big numbers", `{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"MultiPoint","coordinates":[[1,2]]},
			"properties":{"list":[1, {"b": 2}],"big":18446744073709551615,"neg":-9223372036854775808,"exp":1e3}}]}`,
			nil, geojson.Properties{"list": `[1,{"b":2}]`, "big": 18446744073709551615.0, "neg": int64(math.MinInt64), "exp": 1000.0},
			orb.MultiPoint{{1, 2}}},
		{"legacy crs84", `{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:OGC:1.3:CRS84"}},
			"features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]}}]}`,
			nil, geojson.Properties{}, orb.Point{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoad(t, writeFile(t, "f.geojson", tc.json))
			f := c.Features[0]
			if len(c.Features) != 1 || f.ID != tc.id || !reflect.DeepEqual(f.Properties, tc.props) || !orb.Equal(f.Geometry, tc.geometry) {
				t.Errorf("%d features, first id %#v properties %#v geometry %v; want 1, id %#v properties %#v geometry %v",
					len(c.Features), f.ID, f.Properties, f.Geometry, tc.id, tc.props, tc.geometry)
			}
		})
	}
}

// TestLoadFlatGeobuf checks values read from GDAL's files against values
// written out here.
func TestLoadFlatGeobuf(t *testing.T) {
	points := mustLoad(t, "testdata/points.fgb")
	i := slices.IndexFunc(points.Features, func(f *geojson.Feature) bool { return f.Properties["name"] == "Paris" })
	want := geojson.Properties{"name": "Paris", "population": int64(2148000), "area": 105.4, "capital": true}
	if i < 0 || !reflect.DeepEqual(points.Features[i].Properties, want) || points.Features[i].Geometry != (orb.Point{2.3522, 48.8566}) {
		t.Errorf("Paris: %v, want %#v at [2.3522 48.8566]", points.Features, want)
	}

	// No spatial index: the features come in the GeoJSON's order.
	lines := mustLoad(t, "testdata/lines.fgb")
	if ml, ok := lines.Features[1].Geometry.(orb.MultiLineString); !ok || len(ml) != 2 || len(ml[1]) != 3 {
		t.Errorf("feature 1 %v, want a MultiLineString of 2 and 3 positions", lines.Features[1].Geometry)
	}

	countries := mustLoad(t, "testdata/countries.fgb")
	holes := map[string]int{}
	for _, f := range countries.Features {
		polygons, ok := f.Geometry.(orb.MultiPolygon)
		if p, isPolygon := f.Geometry.(orb.Polygon); isPolygon {
			polygons, ok = orb.MultiPolygon{p}, true
		}
		if !ok {
			t.Fatalf("%s: %s", f.Properties["name"], f.Geometry.GeoJSONType())
		}
		for _, p := range polygons {
			holes[f.Properties.MustString("name")] += len(p) - 1
		}
	}
	// Italy's mainland has San Marino and the Vatican as holes.
	if want := map[string]int{"Italy": 2, "Vatican": 0, "San Marino": 0, "Lesotho": 0, "Fiji": 0}; !maps.Equal(holes, want) {
		t.Errorf("holes per country %v, want %v", holes, want)
	}
	if countries.Bounds.Min[0] != -180 || countries.Bounds.Max[0] != 180 {
		t.Errorf("bounds %v, want -180 to 180 (Fiji straddles the antimeridian)", countries.Bounds)
	}
}

// TestLoadErrors checks that bad files are clear errors naming the file and
// what is wrong.
func TestLoadErrors(t *testing.T) {
	point := func(coords string) string {
		return `{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[0,0]}},
			{"type":"Feature","geometry":` + coords + `}]}`
	}
	magic := func(b byte) string { return "fgb\x03fgb" + string(b) }
	for _, tc := range []struct {
		name, file, content string
		want                []string
	}{
		{"not JSON", "a.geojson", `{"type":`, []string{"not GeoJSON"}},
		{"JSON array", "a.json", `[1, 2]`, []string{"not GeoJSON"}},
		{"not a GeoJSON type", "a.json", `{"type":"Topology"}`, []string{`type "Topology" is not a GeoJSON`}},
		{"no type", "a.json", `{"features":[]}`, []string{`type ""`}},
		{"empty collection", "a.geojson", `{"type":"FeatureCollection","features":[]}`, []string{"no features"}},
		{"feature of the wrong type", "a.geojson", `{"type":"FeatureCollection","features":[{"type":"Point","coordinates":[1,2]}]}`,
			[]string{"feature 0", `type "Point", want Feature`}},
		{"null geometry", "a.geojson", point("null"), []string{"feature 1: no geometry"}},
		{"geometry collection", "a.geojson", point(`{"type":"GeometryCollection","geometries":[]}`),
			[]string{"feature 1", "unsupported geometry type GeometryCollection"}},
		{"unknown geometry", "a.geojson", point(`{"type":"Circle","coordinates":[0,0]}`), []string{"feature 1", `"Circle"`}},
		{"longitude out of range", "a.geojson", point(`{"type":"Point","coordinates":[200,10]}`),
			[]string{"feature 1: Point: [200 10] is not a longitude in [-180, 180]"}},
		{"latitude out of range", "a.geojson", point(`{"type":"LineString","coordinates":[[0,0],[10,-90.5]]}`),
			[]string{"feature 1: LineString: position 1: [10 -90.5]"}},
		{"number past float64", "a.geojson", point(`{"type":"Point","coordinates":[1e400,0]}`), []string{"feature 1", "1e400"}},
		{"short position", "a.geojson", point(`{"type":"Point","coordinates":[1]}`), []string{"feature 1", "has 1 numbers, want 2"}},
		{"one-position line", "a.geojson", point(`{"type":"LineString","coordinates":[[1,1]]}`), []string{"feature 1", "1 positions, want 2 or more"}},
		{"open ring", "a.geojson", point(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}`),
			[]string{"feature 1: Polygon: ring 0: ring is not closed"}},
		{"empty multipolygon", "a.geojson", point(`{"type":"MultiPolygon","coordinates":[]}`), []string{"feature 1", "0 polygons"}},
		{"properties not an object", "a.geojson", `{"type":"Feature","geometry":{"type":"Point","coordinates":[0,0]},"properties":[1]}`,
			[]string{"feature 0: properties is not an object"}},
		{"legacy crs", "a.geojson", `{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"EPSG:3857"}},"features":[]}`,
			[]string{`CRS "EPSG:3857" is not WGS84`}},
		{"unknown format", "a.txt", "hello", []string{"neither GeoJSON"}},
		{"fgb without magic", "a.fgb", `{"type":"Point","coordinates":[0,0]}`, []string{"not FlatGeobuf"}},
		{"fgb with no header", "a.fgb", magic(1) + "\x10\x00\x00\x00", []string{"header: truncated"}},
		{"fgb with a corrupt header", "a.fgb", magic(1) + "\x04\x00\x00\x00\xff\xff\x00\x00", []string{"header: corrupt flatbuffer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file, tc.content)
			loadError(t, path, append(tc.want, path)...)
		})
	}
	for file, want := range map[string]string{
		"points-3857.fgb":  `CRS EPSG:3857 "WGS 84 / Pseudo-Mercator" is not EPSG:4326`,
		"points-nocrs.fgb": "no CRS in the header",
		"lines-nocode.fgb": `CRS with no code "unknown" is not EPSG:4326`,
	} {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join("testdata", file)
			loadError(t, path, path, want)
		})
	}
	t.Run("not found", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "missing.geojson")
		if _, err := Load(path); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v, want one naming %s that is fs.ErrNotExist", err, path)
		}
	})
}

// TestFlatGeobufSniffed checks that a FlatGeobuf file of any patch version
// is read whatever its name.
func TestFlatGeobufSniffed(t *testing.T) {
	data, err := os.ReadFile("testdata/points.fgb")
	if err != nil {
		t.Fatal(err)
	}
	want := mustLoad(t, "testdata/points.fgb")
	data[7] = 9
	got := mustLoad(t, writeFile(t, "points.data", string(data)))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("patch version 9, named .data: %v, want %v", got, want)
	}
	data[3] = 2
	loadError(t, writeFile(t, "points.fgb", string(data)), "not FlatGeobuf")
}

// TestFlatGeobufCorrupt checks that every truncation of a file is an error
// and that no byte changed makes the reader panic.
func TestFlatGeobufCorrupt(t *testing.T) {
	for _, name := range []string{"points.fgb", "lines.fgb", "mixed.fgb", "multipolygons.fgb"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(data) {
			if _, err := decode(data[:n], ".fgb"); err == nil {
				t.Errorf("%s cut to %d of %d bytes: no error", name, n, len(data))
			}
		}
		for i := range data {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				bad := bytes.Clone(data)
				bad[i] ^= x
				decode(bad, ".fgb") // must not panic; many changes still read
			}
		}
	}
}

// TestValidate checks the geometry rules shared by both formats.
func TestValidate(t *testing.T) {
	ring := orb.Ring{{0, 0}, {1, 0}, {1, 1}, {0, 0}}
	for _, tc := range []struct {
		name string
		g    orb.Geometry
		want string // "" for valid
	}{
		{"point", orb.Point{180, -90}, ""},
		{"NaN", orb.Point{math.NaN(), 0}, "is not finite"},
		{"infinite", orb.LineString{{0, 0}, {0, math.Inf(1)}}, "position 1: [0 +Inf] is not finite"},
		{"longitude", orb.MultiPoint{{-180.5, 0}}, "point 0: [-180.5 0] is not a longitude"},
		{"empty multipoint", orb.MultiPoint{}, "0 points"},
		{"ring", orb.Polygon{ring}, ""},
		{"short ring", orb.Polygon{ring[1:]}, "ring 0: ring is not closed"},
		{"three-position ring", orb.Polygon{{{0, 0}, {1, 1}, {0, 0}}}, "ring 0: 3 positions, want 4 or more"},
		{"empty polygon", orb.MultiPolygon{{}}, "polygon 0: 0 rings"},
		{"multiline", orb.MultiLineString{{{0, 0}, {1, 1}}, {{2, 2}}}, "line 1: 1 positions"},
		{"collection", orb.Collection{orb.Point{0, 0}}, "unsupported geometry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(tc.g)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate(%v) = %v, want %q", tc.g, err, tc.want)
			}
		})
	}
}

// FuzzLoadFlatGeobuf checks that no input makes the FlatGeobuf reader panic
// and that what it accepts is valid.
func FuzzLoadFlatGeobuf(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.fgb")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte("fgb\x03fgb\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, data, ".fgb")
	})
}

// FuzzLoadGeoJSON checks the same of the GeoJSON reader.
func FuzzLoadGeoJSON(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.geojson")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) < 4096 {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"type":"Feature","id":1,"geometry":{"type":"Point","coordinates":[1,2]},"properties":{"a":[1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, data, ".geojson")
	})
}

// checkDecoded decodes data and checks that an accepted collection holds
// valid features within its bounds.
func checkDecoded(t *testing.T, data []byte, ext string) {
	c, err := decode(data, ext)
	if err != nil {
		return
	}
	if len(c.Features) == 0 || c.GeometryType == "" {
		t.Fatalf("accepted with %d features of type %q", len(c.Features), c.GeometryType)
	}
	for i, f := range c.Features {
		if err := validate(f.Geometry); err != nil {
			t.Fatalf("feature %d accepted: %v", i, err)
		}
		if b := f.Geometry.Bound(); !c.Bounds.Contains(b.Min) || !c.Bounds.Contains(b.Max) {
			t.Fatalf("feature %d bound %v outside %v", i, b, c.Bounds)
		}
		if _, err := json.Marshal(f); err != nil {
			t.Fatalf("feature %d does not encode as GeoJSON: %v", i, err)
		}
	}
}

// mustLoad loads path or fails the test.
func mustLoad(t *testing.T, path string) *Collection {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loadError checks that loading path fails with an error holding each of
// want.
func loadError(t *testing.T, path string, want ...string) {
	t.Helper()
	_, err := Load(path)
	if err == nil {
		t.Fatalf("Load(%s): no error, want %q", path, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load(%s): %v, want it to hold %q", path, err, w)
		}
	}
}

// writeFile writes content to a file name in a temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// near reports whether two points are within 1e-9 degrees of each other.
func near(a, b orb.Point) bool {
	return planar.Distance(a, b) <= 1e-9
}

// sameGeometry reports whether a and b are of one type and shape with
// positions near each other.
func sameGeometry(a, b orb.Geometry) bool {
	pa, sa := flatten(a, nil, nil)
	pb, sb := flatten(b, nil, nil)
	return a.GeoJSONType() == b.GeoJSONType() && slices.Equal(sa, sb) && slices.EqualFunc(pa, pb, near)
}

// flatten appends g's positions to pts and its parts' sizes to shape.
func flatten(g orb.Geometry, pts []orb.Point, shape []int) ([]orb.Point, []int) {
	switch g := g.(type) {
	case orb.Point:
		return append(pts, g), shape
	case orb.MultiPoint:
		return append(pts, g...), append(shape, len(g))
	case orb.LineString:
		return append(pts, g...), append(shape, len(g))
	case orb.Ring:
		return append(pts, g...), append(shape, len(g))
	case orb.MultiLineString:
		shape = append(shape, len(g))
		for _, l := range g {
			pts, shape = flatten(l, pts, shape)
		}
	case orb.Polygon:
		shape = append(shape, len(g))
		for _, r := range g {
			pts, shape = flatten(r, pts, shape)
		}
	case orb.MultiPolygon:
		shape = append(shape, len(g))
		for _, p := range g {
			pts, shape = flatten(p, pts, shape)
		}
	}
	return pts, shape
}

// asGDAL is props as GDAL's schema makes them: a number as a float64 (a
// column of integers and reals is Real, so 777 is read back as 777.0), a
// string that is a JSON object compacted (GDAL writes it with spaces).
func asGDAL(props geojson.Properties) geojson.Properties {
	out := geojson.Properties{}
	for k, v := range props {
		var b bytes.Buffer
		switch x := v.(type) {
		case int64:
			v = float64(x)
		case string:
			if strings.HasPrefix(x, "{") && json.Compact(&b, []byte(x)) == nil {
				v = b.String()
			}
		}
		out[k] = v
	}
	return out
}
