package geofence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

// backends returns both implementations over the bundled dataset.
func backends(t testing.TB) map[string]Backend {
	t.Helper()
	pool, d := spatialtest.Loaded(t)
	return map[string]Backend{
		"postgis": NewPostGIS(pool, 5*time.Second),
		"memory":  NewMemory(d),
	}
}

func TestParseWithin(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		lng, lat, radius, limit string
		field                   string // "" for a valid query
		want                    WithinQuery
	}{
		{name: "valid", lng: "2.35", lat: "48.85", radius: "5000", limit: "7", want: WithinQuery{Lng: 2.35, Lat: 48.85, Radius: 5000, Limit: 7}},
		{name: "default limit", lng: "-180", lat: "90", radius: "100000", want: WithinQuery{Lng: -180, Lat: 90, Radius: 100000, Limit: DefaultLimit}},
		{name: "lng not a number", lng: "x", lat: "0", radius: "1", field: "lng"},
		{name: "lng NaN", lng: "NaN", lat: "0", radius: "1", field: "lng"},
		{name: "lng too big", lng: "180.0001", lat: "0", radius: "1", field: "lng"},
		{name: "lat infinite", lng: "0", lat: "-Inf", radius: "1", field: "lat"},
		{name: "lat too small", lng: "0", lat: "-90.5", radius: "1", field: "lat"},
		{name: "radius zero", lng: "0", lat: "0", radius: "0", field: "radius"},
		{name: "radius over max", lng: "0", lat: "0", radius: "100001", field: "radius"},
		{name: "radius infinite", lng: "0", lat: "0", radius: "+Inf", field: "radius"},
		{name: "limit zero", lng: "0", lat: "0", radius: "1", limit: "0", field: "limit"},
		{name: "limit over max", lng: "0", lat: "0", radius: "1", limit: "1001", field: "limit"},
		{name: "limit not an integer", lng: "0", lat: "0", radius: "1", limit: "2.5", field: "limit"},
		// JSON's numbers only: what strconv would also have read.
		{name: "negative zero", lng: "-0", lat: "-0.0", radius: "0.5", limit: "1000", want: WithinQuery{Lng: 0, Lat: 0, Radius: 0.5, Limit: 1000}},
		{name: "lng with underscore", lng: "1_0", lat: "0", radius: "1", field: "lng"},
		{name: "lng with leading zero", lng: "010", lat: "0", radius: "1", field: "lng"},
		{name: "lat with plus", lng: "0", lat: "+1", radius: "1", field: "lat"},
		{name: "lat with space", lng: "0", lat: " 1", radius: "1", field: "lat"},
		{name: "lat without integer part", lng: "0", lat: ".5", radius: "1", field: "lat"},
		{name: "radius hex float", lng: "0", lat: "0", radius: "0x1p1", field: "radius"},
		{name: "radius exponent", lng: "0", lat: "0", radius: "1e3", limit: "1000", want: WithinQuery{Lng: 0, Lat: 0, Radius: 1000, Limit: 1000}},
		{name: "radius exponent without digits", lng: "0", lat: "0", radius: "1e", field: "radius"},
		{name: "lng as JavaScript writes 0.0000001", lng: "1e-7", lat: "1E1", radius: "1", limit: "1000", want: WithinQuery{Lng: 1e-7, Lat: 10, Radius: 1, Limit: 1000}},
		{name: "radius trailing dot", lng: "0", lat: "0", radius: "5.", field: "radius"},
		{name: "radius inf", lng: "0", lat: "0", radius: "inf", field: "radius"},
		{name: "limit leading zero", lng: "0", lat: "0", radius: "1", limit: "01", field: "limit"},
		{name: "limit with plus", lng: "0", lat: "0", radius: "1", limit: "+5", field: "limit"},
		{name: "limit with underscore", lng: "0", lat: "0", radius: "1", limit: "1_0", field: "limit"},
		{name: "limit hex", lng: "0", lat: "0", radius: "1", limit: "0x10", field: "limit"},
		{name: "limit beyond int64", lng: "0", lat: "0", radius: "1", limit: "99999999999999999999", field: "limit"},
		{name: "limit largest int64", lng: "0", lat: "0", radius: "1", limit: "9223372036854775807", field: "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ParseWithin(tc.lng, tc.lat, tc.radius, tc.limit)
			checkField(t, err, tc.field)
			if tc.field == "" && q != tc.want {
				t.Errorf("got %+v, want %+v", q, tc.want)
			}
		})
	}
}

func TestParseContains(t *testing.T) {
	for _, tc := range []struct {
		lng, lat, field string
	}{
		{"-118.25", "34.05", ""},
		{"", "34", "lng"},
		{"1", "91", "lat"},
		{"1_0", "0", "lng"},
		{"0", "0x1p1", "lat"},
		{"0", "4.5e1", ""}, // JSON's exponent: 45
		{"0", "4.5e", "lat"},
		{"-0.0", "00", "lat"},
	} {
		_, err := ParseContains(tc.lng, tc.lat)
		checkField(t, err, tc.field)
	}
}

func checkField(t *testing.T, err error, name string) {
	t.Helper()
	var fe *param.Error
	switch {
	case name == "" && err != nil:
		t.Fatalf("unexpected error %v", err)
	case name != "" && !errors.As(err, &fe):
		t.Fatalf("error %v, want a *param.Error for %s", err, name)
	case name != "" && fe.Field != name:
		t.Fatalf("error names field %q, want %q", fe.Field, name)
	}
}

func TestWithin(t *testing.T) {
	ctx := context.Background()
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name     string
				q        WithinQuery
				first    int64 // geonameid of the nearest place
				min, max int   // bounds on the number of results
			}{
				{"Paris 5 km", WithinQuery{Lng: 2.3488, Lat: 48.85341, Radius: 5000, Limit: 50}, 2988507, 5, 50},
				{"Paris limit 3", WithinQuery{Lng: 2.3488, Lat: 48.85341, Radius: 25000, Limit: 3}, 2988507, 3, 3},
				{"open ocean", WithinQuery{Lng: -30, Lat: 0, Radius: 100000, Limit: 50}, 0, 0, 0},
				{"across the antimeridian", WithinQuery{Lng: -179.99, Lat: -16.5, Radius: 100000, Limit: 50}, 0, 1, 50},
			} {
				t.Run(tc.name, func(t *testing.T) {
					ns, err := b.Within(ctx, tc.q)
					if err != nil {
						t.Fatal(err)
					}
					if len(ns) < tc.min || len(ns) > tc.max {
						t.Fatalf("%d places, want %d to %d", len(ns), tc.min, tc.max)
					}
					if tc.first != 0 && ns[0].ID != tc.first {
						t.Errorf("nearest is %d %s, want %d", ns[0].ID, ns[0].Name, tc.first)
					}
					for i, n := range ns {
						if n.Distance > tc.q.Radius || (i > 0 && n.Distance < ns[i-1].Distance*0.99) {
							t.Errorf("place %d at %.1f m after %.1f m, radius %.0f", n.ID, n.Distance, ns[max(i-1, 0)].Distance, tc.q.Radius)
						}
					}
				})
			}
			_, err := b.Within(ctx, WithinQuery{Lng: 0, Lat: 0, Radius: -1, Limit: 1})
			checkField(t, err, "radius")
		})
	}
}

// Places at one point are at the same distance from anywhere: within
// answers them by id, lower first, and a limit that falls between them
// keeps the lower. The bundled dataset has such pairs (GeoNames gives
// Montalvo and Montalvinho, Portugal, one point); each is asked about from
// 200 m north of it, on both backends.
func TestWithinTiesByID(t *testing.T) {
	ctx := context.Background()
	_, d := spatialtest.Loaded(t)
	at := map[[2]float64][]int64{}
	for _, p := range d.Places {
		at[p.Point] = append(at[p.Point], p.ID)
	}
	var groups [][]int64 // the ids of each point of several places, sorted
	for _, ids := range at {
		if len(ids) > 1 {
			groups = append(groups, slices.Sorted(slices.Values(ids)))
		}
	}
	slices.SortFunc(groups, func(a, b []int64) int { return cmp.Compare(a[0], b[0]) })
	if len(groups) < 10 {
		t.Fatalf("%d points of several places in the dataset, want at least 10", len(groups))
	}
	byID := map[int64]dataset.Place{}
	for _, p := range d.Places {
		byID[p.ID] = p
	}
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, ids := range groups {
				pt := byID[ids[0]].Point
				q := WithinQuery{Lng: pt[0], Lat: pt[1] + 0.0018, Radius: 1000, Limit: MaxLimit}
				ns, err := b.Within(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				first := slices.IndexFunc(ns, func(n Near) bool { return slices.Contains(ids, n.ID) })
				if first < 0 || first+len(ids) > len(ns) {
					t.Errorf("places %v at %v: not all in the answer from %v", ids, pt, q)
					continue
				}
				tied := ns[first : first+len(ids)]
				for i, n := range tied {
					if n.ID != ids[i] || n.Distance != tied[0].Distance || n.Distance == 0 {
						t.Errorf("places %v at %v, from 200 m north: answered %v; want them at one distance, by id", ids, pt, nears(tied))
						break
					}
				}
				// A limit between the tied places keeps the lower id.
				q.Limit = first + 1
				if ns, err = b.Within(ctx, q); err != nil {
					t.Fatal(err)
				}
				if last := ns[len(ns)-1]; last.ID != ids[0] {
					t.Errorf("places %v at %v, limit %d: the last answered is %d, want %d", ids, pt, q.Limit, last.ID, ids[0])
				}
			}
		})
	}
}

// nears is "id@distance" of each of ns.
func nears(ns []Near) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprintf("%d@%.6f", n.ID, n.Distance)
	}
	return out
}

func TestContains(t *testing.T) {
	ctx := context.Background()
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name     string
				q        ContainsQuery
				want     []string // kind:name
				geometry bool
			}{
				{"Los Angeles", ContainsQuery{Lng: -118.25, Lat: 34.05}, []string{"country:United States of America", "county:Los Angeles"}, false},
				{"Paris with geometry", ContainsQuery{Lng: 2.35, Lat: 48.85, Geometry: true}, []string{"country:France"}, true},
				{"Chukotka east of the antimeridian", ContainsQuery{Lng: -175, Lat: 66}, []string{"country:Russia"}, false},
				{"Alaska, in the band Russia's raw ring drew", ContainsQuery{Lng: -160, Lat: 68}, []string{"country:United States of America", "county:Northwest Arctic"}, false},
				{"Fiji west of the antimeridian", ContainsQuery{Lng: -179.9, Lat: -16.8}, []string{"country:Fiji"}, false},
				{"South Pole", ContainsQuery{Lng: 0, Lat: -89.99}, []string{"country:Antarctica"}, false},
				{"open ocean", ContainsQuery{Lng: -30, Lat: 0}, nil, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					fs, err := b.Contains(ctx, tc.q)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, f := range fs {
						got = append(got, string(f.Kind)+":"+f.Name)
						if (f.Geometry != nil) != tc.geometry {
							t.Errorf("%s: geometry present %v, want %v", f.Name, f.Geometry != nil, tc.geometry)
						}
					}
					if !slices.Equal(got, tc.want) {
						t.Errorf("got %v, want %v", got, tc.want)
					}
				})
			}
			_, err := b.Contains(ctx, ContainsQuery{Lng: math.NaN()})
			checkField(t, err, "lng")
		})
	}
}

func TestFeatures(t *testing.T) {
	n := Near{Place: dataset.Place{ID: 1, Name: "A", Point: [2]float64{1, 2}}, Distance: 3}
	b, err := NearCollection([]Near{n}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":1`, `"distance":3`, `"name":"A"`, `"coordinates":[1,2]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	b, err = FenceCollection([]dataset.Fence{{ID: 6037, Kind: dataset.County, Name: "Los Angeles", Code: "06037"}}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":6037`, `"geometry":null`, `"code":"06037"`, `"kind":"county"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

func TestPostGISCancel(t *testing.T) {
	pool, _ := spatialtest.Loaded(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewPostGIS(pool, time.Second).Within(ctx, WithinQuery{Lng: 0, Lat: 0, Radius: 1000, Limit: 1})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// TestExplainUsesIndex checks that the planner serves the radius and
// containment queries from their GiST indexes.
func TestExplainUsesIndex(t *testing.T) {
	pool, _ := spatialtest.Loaded(t)
	for _, tc := range []struct {
		name, sql, index string
		args             []any
	}{
		{"within", withinSQL, "places_geog_idx", []any{2.35, 48.85, 5000.0, 50}},
		{"within 100 km", withinSQL, "places_geog_idx", []any{2.35, 48.85, 100000.0, 1000}},
		{"contains", containsSQL, "fences_geom_idx", []any{2.35, 48.85, false}},
	} {
		t.Run(tc.name, func(t *testing.T) { spatialtest.UsesIndex(t, pool, tc.index, tc.sql, tc.args...) })
	}
}

// FuzzParseWithin: any parameters give a valid query or a *param.Error
// naming one of them, never a panic; an accepted number is spelt with
// digits, '-' and '.' alone.
func FuzzParseWithin(f *testing.F) {
	f.Add("2.35", "48.85", "5000", "7")
	f.Add("-180", "90", "100000", "")
	f.Add("1_0", "0x1p1", "1e3", "01")
	f.Add("NaN", "-Inf", "+1", "-1")
	f.Add("0", "0", "100000.0000000001", "1000")
	f.Fuzz(func(t *testing.T, lng, lat, radius, limit string) {
		q, err := ParseWithin(lng, lat, radius, limit)
		if err != nil {
			checkRejected(t, err, "lng", "lat", "radius", "limit")
			return
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("ParseWithin(%q, %q, %q, %q) = %+v, which is invalid: %v", lng, lat, radius, limit, q, err)
		}
		checkPlain(t, lng, lat, radius, limit)
	})
}

// FuzzParseContains is FuzzParseWithin for a point.
func FuzzParseContains(f *testing.F) {
	f.Add("-118.25", "34.05")
	f.Add("1_0", "0x1p1")
	f.Add("", "+Inf")
	f.Fuzz(func(t *testing.T, lng, lat string) {
		q, err := ParseContains(lng, lat)
		if err != nil {
			checkRejected(t, err, "lng", "lat")
			return
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("ParseContains(%q, %q) = %+v, which is invalid: %v", lng, lat, q, err)
		}
		checkPlain(t, lng, lat)
	})
}

// checkRejected fails unless err is a *param.Error for one of fields.
func checkRejected(t *testing.T, err error, fields ...string) {
	t.Helper()
	var fe *param.Error
	if !errors.As(err, &fe) || !slices.Contains(fields, fe.Field) || fe.Reason == "" {
		t.Fatalf("error %v, want a *param.Error for one of %v", err, fields)
	}
}

// checkPlain fails if an accepted number holds anything but digits, '-'
// and '.'.
func checkPlain(t *testing.T, ss ...string) {
	t.Helper()
	for _, s := range ss {
		if s != "" && !jsonNumber.MatchString(s) { // "": an optional field left out
			t.Fatalf("%q was accepted as a number", s)
		}
	}
}

// jsonNumber is JSON's grammar of a number (RFC 8259 section 6), written
// apart from the parser under test.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
