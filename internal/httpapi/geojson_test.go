package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/validators/geojsoncheck"
)

// withRoomyPro puts the key of plan "pro" on a plan whose limit no test of
// many queries reaches, whatever a query costs.
func withRoomyPro() option {
	return func(t *testing.T, c *Config) {
		var f plans.File
		if err := json.Unmarshal([]byte(testPlans), &f); err != nil {
			t.Fatal(err)
		}
		f.Plans = append(f.Plans, plans.FilePlan{Name: "pro", MaxRadius: 100_000,
			Limits: []plans.FileLimit{{Name: "minute", Max: 1 << 36, Window: "1m"}}})
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if c.Plans, err = plans.Parse(b); err != nil {
			t.Fatal(err)
		}
	}
}

// probe is a point contains is asked about, why, and the fence its answer
// must hold, by name ("" for any fence).
type probe struct {
	why      string
	lng, lat float64
	want     string
}

// interiorPoints returns a point inside every country and inside every
// eighth county (ST_PointOnSurface of the loaded fences), and the points of
// issue 21: South Africa around Lesotho, and the South Pole.
func interiorPoints(t *testing.T) ([]probe, int) {
	t.Helper()
	pool, _ := spatialtest.Loaded(t)
	rows, err := pool.Query(context.Background(), interiorPointsSQL)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ps := []probe{{"South Africa around Lesotho", 25, -30, "South Africa"}, {"the South Pole", 0, -89.99, "Antarctica"}}
	countries := 0
	for rows.Next() {
		var p probe
		var kind string
		if err := rows.Scan(&kind, &p.why, &p.lng, &p.lat); err != nil {
			t.Fatal(err)
		}
		if kind == "country" {
			countries++
		}
		p.why = kind + " " + p.why
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ps, countries
}

// interiorPointsSQL: a point on the surface of each country and of every
// eighth county in the order of their FIPS codes.
const interiorPointsSQL = `
SELECT kind, name || ' ' || id, ST_X(p), ST_Y(p)
FROM (SELECT kind, id, name, ST_PointOnSurface(geom) AS p,
             row_number() OVER (PARTITION BY kind ORDER BY id) AS n
      FROM fences) f
WHERE kind = 'country' OR n % 8 = 0
ORDER BY kind, id`

// TestGeoJSONValidates validates the geofence routes' answers on both
// backends with validators tileapi did not write (geojsonhint for RFC 7946
// and its right-hand rule, JSTS for the validity of each polygon), and
// checks every ring in Go: exteriors counter-clockwise and holes clockwise
// by signed area, no ring of no area, positions in range. Contains is asked,
// with geometry, at a point inside every country and every eighth county,
// and at the points of issue 21, whose answers must hold South Africa
// (around Lesotho) and Antarctica (at the South Pole, whose ring is closed
// through the pole), held to the same checks as every other fence; within,
// for 200 places around Paris, which must come nearest first by the
// distance each reports, ties by id.
func TestGeoJSONValidates(t *testing.T) {
	probes, countries := interiorPoints(t)
	for _, backend := range []struct {
		name string
		opts []option
	}{
		{"memory", nil},
		{"postgis", []option{withPostGIS()}},
	} {
		t.Run(backend.name, func(t *testing.T) {
			e := newEnv(t, append(backend.opts, withRoomyPro())...)
			// Each distinct feature once: the same fence comes back in many
			// answers (a country with each of its counties), always the same.
			features := map[string]json.RawMessage{}
			var order []string
			for _, p := range probes {
				path := fmt.Sprintf("/v1/geofence/contains?lng=%s&lat=%s&geometry=true",
					strconv.FormatFloat(p.lng, 'f', -1, 64), strconv.FormatFloat(p.lat, 'f', -1, 64))
				var fc struct {
					Features []json.RawMessage `json:"features"`
				}
				if err := json.Unmarshal(geoJSONBody(t, e, path), &fc); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if len(fc.Features) == 0 {
					t.Errorf("%s: no fence contains %s", path, p.why)
				}
				found := p.want == ""
				for _, raw := range fc.Features {
					var f struct {
						ID         int64 `json:"id"`
						Properties struct {
							Kind string `json:"kind"`
							Name string `json:"name"`
						} `json:"properties"`
					}
					if err := json.Unmarshal(raw, &f); err != nil {
						t.Fatal(err)
					}
					found = found || f.Properties.Name == p.want
					k := fmt.Sprintf("%s %d", f.Properties.Kind, f.ID)
					if prev, ok := features[k]; !ok {
						features[k] = raw
						order = append(order, k)
					} else if string(prev) != string(raw) {
						t.Errorf("%s: %s differs from its copy in an earlier answer", path, k)
					}
				}
				if !found {
					t.Errorf("%s: %s is not among the %d fences that contain %s", path, p.want, len(fc.Features), p.why)
				}
			}
			seen := map[string]int{}
			for _, k := range order {
				seen[strings.Fields(k)[0]]++
			}
			if seen["country"] != countries {
				t.Errorf("%d countries answered, want all %d", seen["country"], countries)
			}

			withinPath := "/v1/geofence/within?lng=2.35&lat=48.85&radius=20000&limit=200"
			within := geoJSONBody(t, e, withinPath)
			misordered := checkNearestFirst(t, within)

			docs := []geojsoncheck.Doc{{Name: withinPath, Body: string(within)}}
			rings, goDefects := 0, 0
			for _, k := range order {
				docs = append(docs, geojsoncheck.Doc{Name: k, Body: string(features[k])})
				f, err := geojson.UnmarshalFeature(features[k])
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				mp, ok := f.Geometry.(orb.MultiPolygon)
				if !ok {
					t.Fatalf("%s: geometry is %T, want a MultiPolygon", k, f.Geometry)
				}
				for _, p := range mp {
					rings += len(p)
				}
				for _, d := range geojsoncheck.Polygons(mp) {
					if goDefects++; goDefects <= 10 {
						t.Errorf("%s: %s", k, d)
					}
				}
			}
			hints, invalid := map[string]int{}, map[string]int{}
			for _, r := range geojsoncheck.Check(t, docs) {
				for _, h := range r.Hints {
					if hints[h.Message]++; hints[h.Message] <= 3 {
						t.Errorf("geojsonhint: %s: %s", r.Name, h.Message)
					}
				}
				for _, iv := range r.Invalid {
					if invalid[iv.Message]++; invalid[iv.Message] <= 3 {
						t.Errorf("JSTS: %s: %s at %v", r.Name, iv.Message, iv.At)
					}
				}
			}
			t.Logf("%d answers of contains and one of within; %d features (%v), %d rings; "+
				"%d within results out of order; Go ring defects %d; geojsonhint %v; JSTS invalid %v",
				len(probes), len(order), seen, rings, misordered, goDefects, hints, invalid)
			if t.Failed() {
				t.Logf("geojsonhint messages: %v; JSTS: %v", slices.Sorted(maps.Keys(hints)), slices.Sorted(maps.Keys(invalid)))
			}
		})
	}
}

// geoJSONBody returns the body of a 200 application/geo+json answer to a
// GET of path on the key of plan "pro".
func geoJSONBody(t *testing.T, e *env, path string) []byte {
	t.Helper()
	resp := e.get(t, path, key("pro")...)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/geo+json" {
		t.Fatalf("%s: %d %s: %.300s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return body
}

// checkNearestFirst reports the places of a within answer that come before
// a nearer one, or an equally near one of a lower id, and returns how many.
func checkNearestFirst(t *testing.T, body []byte) int {
	t.Helper()
	var fc struct {
		Features []struct {
			ID         int64 `json:"id"`
			Properties struct {
				Distance float64 `json:"distance"`
			} `json:"properties"`
		} `json:"features"`
	}
	if err := json.Unmarshal(body, &fc); err != nil {
		t.Fatal(err)
	}
	if len(fc.Features) != 200 {
		t.Errorf("within: %d places, want 200", len(fc.Features))
	}
	bad := 0
	for i := 1; i < len(fc.Features); i++ {
		a, b := fc.Features[i-1], fc.Features[i]
		if a.Properties.Distance > b.Properties.Distance ||
			a.Properties.Distance == b.Properties.Distance && a.ID > b.ID {
			if bad++; bad <= 5 {
				t.Errorf("within: place %d at %.3f m before place %d at %.3f m", a.ID, a.Properties.Distance, b.ID, b.Properties.Distance)
			}
		}
	}
	return bad
}
