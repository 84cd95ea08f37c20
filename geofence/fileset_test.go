package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/internal/validators/geojsoncheck"
)

func feature(id any, g orb.Geometry, props geojson.Properties) *geojson.Feature {
	f := geojson.NewFeature(g)
	f.ID = id
	if props != nil {
		f.Properties = props
	}
	return f
}

func TestNewFileSetErrors(t *testing.T) {
	pt := orb.Point{1, 1}
	square := orb.Polygon{{{0, 0}, {1, 0}, {1, 1}, {0, 1}, {0, 0}}}
	for _, tc := range []struct {
		name       string
		features   []*geojson.Feature
		properties []string
		want       string
	}{
		{"null feature", []*geojson.Feature{feature(1.0, pt, nil), nil}, nil, "feature 2 is null"},
		{"ids mixed", []*geojson.Feature{feature(1.0, pt, nil), feature("b", pt, nil)}, nil, "feature 2: its id is string where feature 1's is number"},
		{"an id missing", []*geojson.Feature{feature(1.0, pt, nil), feature(nil, pt, nil)}, nil, "feature 2: its id is none"},
		{"id not an integer", []*geojson.Feature{feature(1.5, pt, nil)}, nil, "feature 1: id 1.5: must be an integer"},
		{"id too big", []*geojson.Feature{feature(1e17, pt, nil)}, nil, "must be an integer of at most 2^53"},
		{"id an object", []*geojson.Feature{feature(map[string]any{}, pt, nil)}, nil, "is a map[string]interface {}, not a number or a string"},
		{"out of range", []*geojson.Feature{feature(1.0, orb.Point{181, 0}, nil)}, nil, "feature 1: position [181 0] is not a longitude"},
		{"not finite", []*geojson.Feature{feature(1.0, orb.LineString{{0, 0}, {math.NaN(), 0}}, nil)}, nil, "position [NaN 0]"},
		{"ring not closed", []*geojson.Feature{feature(1.0, orb.Polygon{{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}, nil)}, nil, "ring 1: 4 positions, not a closed ring"},
		{"line of one", []*geojson.Feature{feature(1.0, orb.MultiLineString{{{0, 0}, {1, 1}}, {{0, 0}}}, nil)}, nil, "line 2: a line of 1 positions"},
		{"hole out of range", []*geojson.Feature{feature(1.0, orb.MultiPolygon{square, {square[0], {{0, 0}, {0, 95}, {1, 1}, {0, 0}}}}, nil)}, nil, "polygon 2: ring 2: position [0 95]"},
		{"a bound", []*geojson.Feature{feature(1.0, orb.Bound{}, nil)}, nil, "a orb.Bound is not a GeoJSON geometry"},
		{"no such property", []*geojson.Feature{feature(1.0, pt, geojson.Properties{"a": 1.0})}, []string{"a", "b"}, `property "b": no feature has it`},
		{"property not a scalar", []*geojson.Feature{feature(1.0, pt, geojson.Properties{"a": 1.0}), feature(2.0, pt, geojson.Properties{"a": []any{1.0}})}, []string{"a"}, `property "a": feature 2 has a value that is not a string`},
		{"property distance", []*geojson.Feature{feature(1.0, pt, geojson.Properties{"distance": 1.0})}, []string{"distance"}, `property "distance": within answers give`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewFileSet("stores", "", tc.features, tc.properties)
			if err == nil || !strings.HasPrefix(err.Error(), `geofence: set "stores": `) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestFileSetFlags checks the questions a file set answers, its fields and
// their defaults.
func TestFileSetFlags(t *testing.T) {
	pt := orb.Point{1, 1}
	square := orb.Polygon{{{0, 0}, {1, 0}, {1, 1}, {0, 1}, {0, 0}}}
	for _, tc := range []struct {
		name                 string
		features             []*geojson.Feature
		properties           []string
		contains, pointsOnly bool
		fields               map[string]string
	}{
		{
			name: "points, defaults", pointsOnly: true,
			features: []*geojson.Feature{
				feature(1.0, pt, geojson.Properties{"name": "a", "n": 1.0, "ok": true, "tags": []any{"x"}, "code": "7", "distance": 3.0, "empty": nil}),
				feature(2.0, pt, geojson.Properties{"name": "b", "code": 7.0}),
				feature(3.0, nil, nil), // no geometry: in no answer, and no kind of geometry
			},
			fields: map[string]string{"name": FieldString, "n": FieldNumber, "ok": FieldBoolean, "code": FieldMixed, "empty": FieldMixed, DistanceProperty: FieldNumber},
		},
		{
			name: "polygons, properties named", contains: true, properties: []string{"name"},
			features: []*geojson.Feature{feature("a", square, geojson.Properties{"name": "a", "n": 1.0}), feature("b", orb.MultiPolygon{square}, nil)},
			fields:   map[string]string{"name": FieldString, DistanceProperty: FieldNumber},
		},
		{
			name: "mixed", properties: []string{},
			features: []*geojson.Feature{feature(nil, square, nil), feature(nil, pt, nil)},
			fields:   map[string]string{DistanceProperty: FieldNumber},
		},
		{
			name: "lines", features: []*geojson.Feature{feature(nil, orb.LineString{{0, 0}, {1, 1}}, nil)},
			fields: map[string]string{DistanceProperty: FieldNumber},
		},
		{name: "none", fields: map[string]string{DistanceProperty: FieldNumber}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewFileSet("s", "d", tc.features, tc.properties)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != "s" || s.Description != "d" || !s.Within || s.Contains != tc.contains || s.PointsOnly != tc.pointsOnly || !maps.Equal(s.Fields, tc.fields) {
				t.Errorf("got %+v", s)
			}
			if _, err := NewSets(s); err != nil {
				t.Error(err)
			}
		})
	}
}

// ids returns the features' ids and distances, as text.
func ids(fs []*geojson.Feature) string {
	var s []string
	for _, f := range fs {
		if d, ok := f.Properties[DistanceProperty]; ok {
			s = append(s, fmt.Sprintf("%v@%.3f", f.ID, d))
		} else {
			s = append(s, fmt.Sprint(f.ID))
		}
	}
	return strings.Join(s, " ")
}

// TestFileSetWithin checks distances (those PostGIS gives on geography
// for the same geometries, to the millimetre), their order and ties, the
// limit, the antimeridian and the poles, and which answers carry
// geometries.
func TestFileSetWithin(t *testing.T) {
	ctx := context.Background()
	at := orb.Point{10, 0}
	points, err := NewFileSet("points", "", []*geojson.Feature{
		feature(3.0, at, nil),
		feature(1.0, at, nil),
		feature(2.0, orb.Point{10, 0.001}, geojson.Properties{"name": "north"}),
		feature(4.0, orb.Point{10.001, 0}, nil),
		feature(5.0, orb.Point{179.9995, 0}, nil),
		feature(6.0, orb.Point{-179.9995, 0}, nil),
		feature(7.0, orb.Point{0, 90}, nil),
		feature(8.0, orb.Point{135, 89.999}, nil),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    WithinQuery
		want string
	}{
		// The same place: by id. A thousandth of a degree: 110.574 m north
		// (a meridian arc), 111.319 m east (along the equator).
		{WithinQuery{Lng: 10, Lat: 0, Radius: 200, Limit: 10}, "1@0.000 3@0.000 2@110.574 4@111.319"},
		{WithinQuery{Lng: 10, Lat: 0, Radius: 111, Limit: 10}, "1@0.000 3@0.000 2@110.574"},
		{WithinQuery{Lng: 10, Lat: 0, Radius: 200, Limit: 3}, "1@0.000 3@0.000 2@110.574"},
		{WithinQuery{Lng: 180, Lat: 0, Radius: 100, Limit: 10}, "5@55.660 6@55.660"},
		{WithinQuery{Lng: -179.99, Lat: 0, Radius: 2000, Limit: 10}, "6@1057.535 5@1168.855"},
		{WithinQuery{Lng: -45, Lat: 89.9995, Radius: 200, Limit: 10}, "7@55.847 8@167.541"},
		{WithinQuery{Lng: 0, Lat: -89, Radius: 100_000, Limit: 10}, ""},
	} {
		fs, err := points.Source.Within(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(fs); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.q, got, tc.want)
		}
		for _, f := range fs {
			if _, ok := f.Geometry.(orb.Point); !ok {
				t.Errorf("%+v: feature %v has geometry %v: a set of points answers with them", tc.q, f.ID, f.Geometry)
			}
		}
	}
	fs, _ := points.Source.Within(ctx, WithinQuery{Lng: 10, Lat: 0.001, Radius: 1, Limit: 1})
	if len(fs) != 1 || !maps.Equal(fs[0].Properties, geojson.Properties{"name": "north", "distance": 0.0}) {
		t.Errorf("got %v", fs)
	}
	fs[0].Properties["name"] = "changed"
	if fs, _ := points.Source.Within(ctx, WithinQuery{Lng: 10, Lat: 0.001, Radius: 1, Limit: 1}); fs[0].Properties["name"] != "north" {
		t.Error("an answer's properties are the set's own")
	}

	// Lines and polygons, with string ids: distances to the nearest edge,
	// 0 inside; geometries only when asked for.
	square := orb.Polygon{{{0, 0}, {0, 0.01}, {0.01, 0.01}, {0.01, 0}, {0, 0}}} // clockwise
	shapes, err := NewFileSet("shapes", "", []*geojson.Feature{
		feature("line", orb.LineString{{-1, 0}, {1, 0}}, nil),
		feature("square", square, nil),
		feature("holed", orb.Polygon{square[0], {{0.004, 0.004}, {0.006, 0.004}, {0.006, 0.006}, {0.004, 0.006}, {0.004, 0.004}}}, nil),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    WithinQuery
		want string
	}{
		{WithinQuery{Lng: 0.005, Lat: 0.001, Radius: 1000, Limit: 10}, "holed@0.000 square@0.000 line@110.574"},
		{WithinQuery{Lng: 0.005, Lat: 0.0052, Radius: 1000, Limit: 10}, "square@0.000 holed@88.459 line@574.986"},
		{WithinQuery{Lng: 0.5, Lat: -0.001, Radius: 200, Limit: 10}, "line@110.574"},
		{WithinQuery{Lng: 2, Lat: 0, Radius: 200, Limit: 10}, ""},
	} {
		for _, geometry := range []bool{false, true} {
			tc.q.Geometry = geometry
			fs, err := shapes.Source.Within(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(fs); got != tc.want {
				t.Errorf("%+v: got %s, want %s", tc.q, got, tc.want)
			}
			for _, f := range fs {
				if (f.Geometry != nil) != geometry {
					t.Errorf("%+v: feature %v has geometry %v", tc.q, f.ID, f.Geometry)
				}
			}
		}
	}
	if square[0][1] != (orb.Point{0, 0.01}) {
		t.Error("the set wound the caller's ring in place")
	}
}

// TestFileSetContains checks containment, boundaries included, the order
// by id, and that answered polygons are wound by the right-hand rule.
func TestFileSetContains(t *testing.T) {
	ctx := context.Background()
	cw := orb.Ring{{0, 0}, {0, 2}, {2, 2}, {2, 0}, {0, 0}}
	hole := orb.Ring{{0.5, 0.5}, {1.5, 0.5}, {1.5, 1.5}, {0.5, 1.5}, {0.5, 0.5}} // counter-clockwise
	spike := orb.Ring{{0.2, 1.8}, {0.4, 1.6}, {0.2, 1.8}, {0.2, 1.8}}            // out and back: no area
	s, err := NewFileSet("zones", "", []*geojson.Feature{
		feature(20.0, orb.Polygon{cw, hole, spike}, geojson.Properties{"name": "holed"}),
		feature(10.0, orb.MultiPolygon{{{{1, 1}, {3, 1}, {3, 3}, {1, 3}, {1, 1}}}, {{{5, 5}, {6, 5}, {6, 6}, {5, 5}}}, {{{7, 7}, {8, 8}, {7, 7}, {7, 7}}}}, nil),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Contains {
		t.Fatal("polygons answer contains")
	}
	for _, tc := range []struct {
		pt   orb.Point
		want string
	}{
		{orb.Point{0.25, 0.25}, "20"},
		{orb.Point{1, 1}, "10"},                 // a corner of one, in the other's hole
		{orb.Point{1.2, 1.2}, "10"},             // in the hole
		{orb.Point{0.5, 1}, "20"},               // on the hole's edge
		{orb.Point{0, 1}, "20"},                 // on the exterior's edge
		{orb.Point{5.5, 5.2}, "10"},             // the second polygon
		{orb.Point{5.2, 5.5}, ""},               // beside it
		{orb.Point{-170, 80}, ""},               // nowhere
		{orb.Point{2, 2}, "10 20"},              // a corner of both
		{orb.Point{2.5, 2.5}, "10"},             // one only
		{orb.Point{2.0000001, 2}, "10"},         // just beyond the other
		{orb.Point{1.4999999, 1.5}, "10 20"},    // on the hole's edge, beside its corner
		{orb.Point{1.4999999, 1.4999999}, "10"}, // just inside the hole
		{orb.Point{0.5, 0.5}, "20"},             // the hole's corner
		{orb.Point{0.3, 1.7}, "20"},             // on the hole of no area, which is none
		{orb.Point{7.5, 7.5}, ""},               // on the polygon of no area, which is none
	} {
		for _, geometry := range []bool{false, true} {
			fs, err := s.Source.Contains(ctx, ContainsQuery{Lng: tc.pt[0], Lat: tc.pt[1], Geometry: geometry})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(fs); got != tc.want {
				t.Errorf("%v: got %q, want %q", tc.pt, got, tc.want)
			}
			for _, f := range fs {
				if (f.Geometry != nil) != geometry {
					t.Errorf("%v: feature %v has geometry %v", tc.pt, f.ID, f.Geometry)
				}
			}
		}
	}
	// Both features, wound as RFC 7946 wants, without their rings of no
	// area: 20 its exterior and hole, 10 its two polygons of area.
	fs, err := s.Source.Contains(ctx, ContainsQuery{Lng: 2, Lat: 2, Geometry: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(fs); got != "10 20" {
		t.Fatalf("at 2,2: %s", got)
	}
	if p, ok := fs[1].Geometry.(orb.Polygon); !ok || len(p) != 2 {
		t.Errorf("feature 20: %v, want its exterior and its hole of area", fs[1].Geometry)
	}
	if mp, ok := fs[0].Geometry.(orb.MultiPolygon); !ok || len(mp) != 2 {
		t.Errorf("feature 10: %v, want its two polygons of area", fs[0].Geometry)
	}
	fc := geojson.NewFeatureCollection()
	fc.Features = fs
	for _, f := range fs {
		mp, ok := f.Geometry.(orb.MultiPolygon)
		if p, isPolygon := f.Geometry.(orb.Polygon); isPolygon {
			mp, ok = orb.MultiPolygon{p}, true
		}
		if d := geojsoncheck.Polygons(mp); !ok || len(d) > 0 {
			t.Errorf("feature %v: %v %q", f.ID, f.Geometry, d)
		}
	}
	b, err := json.Marshal(fc)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range geojsoncheck.Check(t, []geojsoncheck.Doc{{Name: "contains", Body: string(b)}}) {
		if len(r.Hints) > 0 || len(r.Invalid) > 0 {
			t.Errorf("%s: %+v %+v", r.Name, r.Hints, r.Invalid)
		}
	}
	if !slices.Equal(cw, orb.Ring{{0, 0}, {0, 2}, {2, 2}, {2, 0}, {0, 0}}) {
		t.Error("the set wound the caller's ring in place")
	}
}

// TestSpheroidDistance checks distances against known geodesics of the
// WGS84 ellipsoid: a degree of the equator (a times pi/180), a degree of
// the meridian from the equator, and Vincenty's own test line (Flinders
// Peak to Buninyong, 54 972.271 m).
func TestSpheroidDistance(t *testing.T) {
	for _, tc := range []struct {
		p, q orb.Point
		want float64
	}{
		{orb.Point{0, 0}, orb.Point{1, 0}, 111_319.490_793_273_57},
		{orb.Point{0, 0}, orb.Point{0, 1}, 110_574.388_557_799},
		{orb.Point{144.42486788888888, -37.95103341666667}, orb.Point{143.92649552777777, -37.65282113888889}, 54_972.271},
		{orb.Point{5, 5}, orb.Point{5, 5}, 0},
	} {
		if got := spheroidDistance(tc.p, tc.q); math.Abs(got-tc.want) > 1e-9*tc.want+1e-3 {
			t.Errorf("%v to %v: %.6f m, want %.6f m", tc.p, tc.q, got, tc.want)
		}
	}
	// Nearly antipodal, where Vincenty's iteration may fail, within a
	// hundredth of what PostGIS gives.
	if d := spheroidDistance(orb.Point{0, 0}, orb.Point{179.7, 0.1}); math.Abs(d-19_985_791.198) > 0.01*19_985_791.198 {
		t.Errorf("nearly antipodal: %.3f m", d)
	}
}
