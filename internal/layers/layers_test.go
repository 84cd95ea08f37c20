package layers

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/param"
)

func TestParse(t *testing.T) {
	f, err := Parse([]byte(`
layers:
  - name: parcels
    table: public.parcels
    geometry: geom
    id: parcel_id
    properties: [owner, area_m2]
    minzoom: 10
    max_features: 5000
    filter: {column: area_m2, min_by_zoom: {10: 5000, 14: 0}}
  - name: heat
    function: public.heat
    params:
      - {name: year, type: integer, min: 1990, max: 2030, default: 2020}
      - {name: kind, type: string, enum: [a, b]}
  - name: base
    pmtiles: https://example.com/base.pmtiles
  - name: stores-file
    file: stores.geojson
geofences:
  - name: stores
    table: stores
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Layers) != 4 || len(f.Geofences) != 1 {
		t.Fatalf("got %d layers and %d sets", len(f.Layers), len(f.Geofences))
	}
	kinds := []string{Table, Function, PMTiles, FileKind}
	for i, l := range f.Layers {
		if l.Kind() != kinds[i] {
			t.Errorf("layer %s: kind %s, want %s", l.Name, l.Kind(), kinds[i])
		}
	}
	p := f.Layers[0]
	if lo, hi := p.Zooms(); lo != 10 || hi != MaxZoom || p.Features() != 5000 {
		t.Errorf("parcels: zooms %d-%d, features %d", lo, hi, p.Features())
	}
	if b, _ := f.Layers[2].Zooms(); b != 0 || f.Layers[2].Features() != DefaultMaxFeatures {
		t.Errorf("defaults: minzoom %d, features %d", b, f.Layers[2].Features())
	}
	for z, want := range map[int]float64{0: 5000, 9: 5000, 10: 5000, 13: 5000, 14: 0, 22: 0} {
		if got, ok := p.Filter.Min(z); !ok || got != want {
			t.Errorf("filter at zoom %d: %v %v, want %v", z, got, ok, want)
		}
	}
	if _, ok := f.Layers[1].Filter.Min(3); ok {
		t.Error("no filter, yet a threshold")
	}
	// The same file in JSON.
	j, err := Parse([]byte(`{"layers": [{"name": "parcels", "table": "public.parcels", "minzoom": 10}]}`))
	if err != nil || len(j.Layers) != 1 || j.Layers[0].Table != "public.parcels" {
		t.Fatalf("JSON: %+v, %v", j, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`layers: [{name: a, table: t, tabel: u}]`, `field tabel not found`},
		{`layers: [{table: t}]`, `layer 1 has no name`},
		{`layers: [{name: A, table: t}]`, `layer "A": name must be`},
		{`layers: [{name: a, table: t}, {name: a, file: f.geojson}]`, `layer "a": the name is used twice`},
		{`layers: [{name: places, table: t}]`, `layer "places": the name is used twice`},
		{`layers: [{name: a}]`, `layer "a": needs exactly one source`},
		{`layers: [{name: a, table: t, file: f}]`, `layer "a": needs exactly one source`},
		{`layers: [{name: a, table: t, minzoom: 9, maxzoom: 3}]`, `layer "a": the zoom range is inverted: minzoom 9 is above maxzoom 3`},
		{`layers: [{name: a, table: t, maxzoom: 23}]`, `layer "a": maxzoom 23 must be in [0, 22]`},
		{`layers: [{name: a, table: t, minzoom: -1}]`, `layer "a": minzoom -1`},
		{`layers: [{name: a, table: t, max_features: -5}]`, `max_features -5`},
		{`layers: [{name: a, pmtiles: x.pmtiles, id: gid}]`, `options of table and file layers, not of a pmtiles layer`},
		{`layers: [{name: a, table: t, params: [{name: y, type: integer}]}]`, `params are options of function layers`},
		{`layers: [{name: a, file: f.geojson, geometry: g}]`, `a file layer takes its geometry and id from the file`},
		{`layers: [{name: a, table: t, properties: [x, x]}]`, `properties: "x" is listed twice`},
		{`layers: [{name: a, table: t, geometry: g, properties: [g]}]`, `"g" is the geometry column`},
		{`layers: [{name: a, table: t, filter: {column: c}}]`, `filter needs a column and min_by_zoom`},
		{`layers: [{name: a, file: f.geojson, filter: {column: c, min_by_zoom: {0: 1}}}]`, `filter is an option of table layers`},
		{`layers: [{name: a, table: t, filter: {column: c, min_by_zoom: {40: 1}}}]`, `zoom 40 must be in`},
		{`layers: [{name: a, pmtiles: "s3://bucket/x.pmtiles"}]`, `only a path or an http(s) URL`},
		{`layers: [{name: a, function: f, params: [{name: y, type: date}]}]`, `type "date" must be`},
		{`layers: [{name: a, function: f, params: [{name: y, type: integer}, {name: y, type: string}]}]`, `"y" is declared twice`},
		{`layers: [{name: a, function: f, params: [{name: y, type: string, min: 1}]}]`, `min and max bound numbers`},
		{`layers: [{name: a, function: f, params: [{name: y, type: integer, min: 5, max: 1}]}]`, `min 5 is above max 1`},
		{`layers: [{name: a, function: f, params: [{name: y, type: integer, max: 10, default: 11}]}]`, `params: default: invalid y: must be in [-inf, 10]`},
		{`layers: [{name: a, function: f, params: [{name: y, type: number, default: "0x1p1"}]}]`, `params: default: invalid y: must be a number as JSON writes one`},
		{`layers: [{name: a, function: f, params: [{name: y, type: number, default: .nan}]}]`, `params: default: invalid y: must be a JSON scalar`},
		{`layers: [{name: a, function: f, params: [{name: y, type: integer, enum: [a]}]}]`, `enum lists strings`},
		{`geofences: [{name: s}]`, `geofence set "s": needs exactly one source`},
		{`geofences: [{name: s, table: t}, {name: s, table: u}]`, `geofence set "s": the name is used twice`},
		{`geofences: [{name: boundaries, table: t}]`, `geofence set "boundaries": the name is used twice`},
		{"layers: []\n---\nlayers: []\n", `more than one document`},
	} {
		f, err := Parse([]byte(tc.body))
		if err == nil { // Parse reserves no names; a server checks its own
			err = f.Check([]string{"places", "boundaries"})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.body, err, tc.want)
		}
	}
}

func TestParam(t *testing.T) {
	lo, hi := 1.0, 10.0
	for _, tc := range []struct {
		p    Param
		in   string
		want any
		err  string
	}{
		{Param{Type: Integer}, "7", int64(7), ""},
		{Param{Type: Integer}, "7.5", nil, "must be an integer"},
		{Param{Type: Integer, Min: &lo, Max: &hi}, "11", nil, "must be in [1, 10]"},
		{Param{Type: Integer}, "1e300", nil, "at most 2^53"},
		{Param{Type: Number}, "2.5", 2.5, ""},
		{Param{Type: Number}, "NaN", nil, "must be a number as JSON writes one"},
		{Param{Type: Number}, "", nil, "is required: a number as JSON writes one"},
		{Param{Type: Boolean}, "true", true, ""},
		{Param{Type: Boolean}, "yes", nil, "must be true or false"},
		{Param{Type: String, Enum: []string{"a", "b"}}, "b", "b", ""},
		{Param{Type: String, Enum: []string{"a", "b"}}, "c", nil, "must be one of a, b"},
		{Param{Type: String}, strings.Repeat("x", 257), nil, "at most 256 bytes"},
		{Param{Type: String, MaxLength: 3}, "abcd", nil, "at most 3 bytes"},
		{Param{Type: String}, "'; DROP TABLE t; --", "'; DROP TABLE t; --", ""},
	} {
		got, err := tc.p.Parse(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%+v %q: %v %v, want %v", tc.p, tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v %q: error %v, want %q", tc.p, tc.in, err, tc.err)
		}
	}
}

// TestParamNumbers: integer and number parameters take exactly JSON's
// number grammar (RFC 8259 section 6), as every other number of the API,
// and a refusal is a *param.Error naming the parameter and saying what a
// valid value looks like.
func TestParamNumbers(t *testing.T) {
	integer := Param{Name: "year", Type: Integer}
	number := Param{Name: "scale", Type: Number}
	for _, tc := range []struct {
		p    Param
		in   string
		want any
	}{
		{integer, "0", int64(0)},
		{integer, "-0", int64(0)},
		{integer, "12", int64(12)},
		{integer, "-3", int64(-3)},
		{integer, "1e2", int64(100)}, // JSON Schema's integer: a number with no fraction
		{integer, "12.0", int64(12)},
		{integer, "9007199254740992", int64(1 << 53)},
		{number, "0", 0.0},
		{number, "-73.98", -73.98},
		{number, "0.5", 0.5},
		{number, "1e-7", 1e-7},
		{number, "1E1", 10.0},
		{number, "-1.5e+3", -1500.0},
		{number, "2.5E-2", 0.025},
		{number, "1e007", 1e7},
	} {
		got, err := tc.p.Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%s %q: %v %v, want %v", tc.p.Type, tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		p      Param
		in     string
		reason string
	}{
		{number, "0x1p1", "must be a number as JSON writes one"},
		{number, "+1", "must be a number as JSON writes one"},
		{number, ".5", "must be a number as JSON writes one"},
		{number, "5.", "must be a number as JSON writes one"},
		{number, "01", "must be a number as JSON writes one"},
		{number, "1_0", "must be a number as JSON writes one"},
		{number, "Inf", "must be a number as JSON writes one"},
		{number, "NaN", "must be a number as JSON writes one"},
		{number, " 1", "must be a number as JSON writes one"},
		{number, "1e", "must be a number as JSON writes one"},
		{number, "", "is required: a number as JSON writes one"},
		{number, "1e400", "is too large"},
		{integer, "0x10", "must be a number as JSON writes one"},
		{integer, "+7", "must be a number as JSON writes one"},
		{integer, "07", "must be a number as JSON writes one"},
		{integer, "1_000", "must be a number as JSON writes one"},
		{integer, "7.", "must be a number as JSON writes one"},
		{integer, "7.5", "must be an integer"},
		{integer, "1e-1", "must be an integer"},
		{integer, "9007199254740994", "at most 2^53"},
	} {
		v, err := tc.p.Parse(tc.in)
		var fe *param.Error
		if !errors.As(err, &fe) || fe.Field != tc.p.Name || !strings.Contains(fe.Reason, tc.reason) {
			t.Errorf("%s %q: %v %v, want a *param.Error for %s saying %q", tc.p.Type, tc.in, v, err, tc.p.Name, tc.reason)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "layers.yaml")
	if err := os.WriteFile(path, []byte("layers: [{name: a, maxzoom: 3, minzoom: 4, table: t}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), "layers: "+path+": layer \"a\": the zoom range is inverted") {
		t.Errorf("error %v, want one naming the file and the layer", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
}

// FuzzParse: any bytes are a layers file or an error; never a panic, and
// a file that parses passes its own check.
func FuzzParse(f *testing.F) {
	f.Add([]byte("layers: [{name: a, table: public.t, minzoom: 2, filter: {column: c, min_by_zoom: {3: 5}}}]"))
	f.Add([]byte(`{"layers": [{"name": "f", "function": "fn", "params": [{"name": "y", "type": "integer", "min": 1, "default": 3}]}]}`))
	f.Add([]byte("geofences: [{name: s, file: s.geojson, properties: [a, b]}]"))
	f.Add([]byte("layers: [{name: a, pmtiles: x, minzoom: 9, maxzoom: 3}]\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		if err := file.Check(nil); err != nil {
			t.Fatalf("Parse accepted a file its Check refuses: %v", err)
		}
		for _, l := range file.Layers {
			if lo, hi := l.Zooms(); lo > hi || hi > MaxZoom || l.Features() < 1 {
				t.Fatalf("layer %q: zooms %d-%d, features %d", l.Name, lo, hi, l.Features())
			}
		}
	})
}
