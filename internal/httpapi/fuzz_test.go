package httpapi_test

// Fuzz tests of every request parser, through a real server built with the
// exported API alone and backed by the in-memory stores. Each input asks:
// is the answer a 200 or 304, or a 4xx problem+json with a stable code (and,
// for a bad parameter, the field), never a 5xx; and was the caller charged
// exactly the X-RateLimit-Cost of a served request, and nothing for any
// other answer? The committed corpora are in testdata/fuzz/<FuzzName>/;
// .ci/fuzz runs each target for a few seconds.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/dataversion"
	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/tiles"
)

// fuzzPlans give the anonymous caller and the key fuzzKey one limit so
// large and so long that no fuzz run fills or outlives it: usage only
// grows, by exactly what is charged. Plan "small" (fuzzSmallKey) fills
// quickly, so its 422s and 429s are fuzzed too.
const fuzzPlans = `{"plans": [
	{"name": "anonymous", "max_radius_m": 100000, "limits": [{"name": "day", "max": 1099511627776, "window": "24h"}]},
	{"name": "fuzz", "max_radius_m": 100000, "limits": [{"name": "day", "max": 1099511627776, "window": "24h"}]},
	{"name": "small", "max_radius_m": 20000, "limits": [{"name": "day", "max": 20, "window": "24h"}]}
]}`

const (
	fuzzKey      = "fuzz-key"
	fuzzSmallKey = "fuzz-small-key"
	fuzzAdmin    = "fuzz-admin-token"
	// fuzzPeer is the TCP peer of every request: httptest's default, in
	// the trusted proxy range of FuzzForwardedFor.
	fuzzPeer = "192.0.2.1:1234"
)

// A few places and fences, parsed as the bundled files are: the fuzzed
// parsers do not depend on the data, and the whole dataset would take a fuzz
// worker longer to load, instrumented, than a CI run gives it to fuzz.
const (
	fuzzPlaces = `geonameid,name,country,admin_code,feature_code,population,lon,lat
2988507,Paris,FR,11,PPLC,2138551,2.3488,48.85341
5128581,New York City,US,NY,PPL,8804190,-74.00597,40.71427
5368361,Los Angeles,US,CA,PPL,3898747,-118.24368,34.05223
2077895,Alice Springs,AU,03,PPL,32210,133.88362,-23.69748
`
	fuzzCountries = `{"type": "FeatureCollection", "features": [
	{"type": "Feature", "id": "250", "properties": {"name": "France"},
	 "geometry": {"type": "Polygon", "coordinates": [[[-5, 42], [8, 42], [8, 51], [-5, 51], [-5, 42]]]}},
	{"type": "Feature", "id": "840", "properties": {"name": "United States"},
	 "geometry": {"type": "Polygon", "coordinates": [[[-125, 25], [-66, 25], [-66, 49], [-125, 49], [-125, 25]]]}},
	{"type": "Feature", "id": "242", "properties": {"name": "Fiji"},
	 "geometry": {"type": "Polygon", "coordinates": [[[177, -19], [180, -19], [-179, -19], [-179, -16], [180, -16], [177, -16], [177, -19]]]}}]}`
	fuzzCounties = `{"type": "FeatureCollection", "features": [
	{"type": "Feature", "id": "06037", "properties": {"name": "Los Angeles"},
	 "geometry": {"type": "Polygon", "coordinates": [[[-119, 33.5], [-117.5, 33.5], [-117.5, 35], [-119, 35], [-119, 33.5]]]}}]}`
)

// newFuzzServer returns a server over the fuzz dataset in memory, with the
// keys fuzzKey and fuzzSmallKey, the admin API on, and cfg changed by mod.
func newFuzzServer(tb testing.TB, mod func(*httpapi.Config)) http.Handler {
	tb.Helper()
	d, err := dataset.LoadFrom(dataset.Sources{
		Places:    &dataset.Source{Name: "places", R: strings.NewReader(fuzzPlaces)},
		Countries: &dataset.Source{Name: "countries", R: strings.NewReader(fuzzCountries)},
		Counties:  &dataset.Source{Name: "counties", R: strings.NewReader(fuzzCounties)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ps, err := plans.Parse([]byte(fuzzPlans))
	if err != nil {
		tb.Fatal(err)
	}
	ks := keys.NewMemory()
	for secret, plan := range map[string]string{fuzzKey: "fuzz", fuzzSmallKey: "small"} {
		if _, err := ks.Add(context.Background(), plan, plan, secret); err != nil {
			tb.Fatal(err)
		}
	}
	index := keys.NewIndex(ks, time.Minute)
	if err := index.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
	cfg := httpapi.Config{
		Quota:       quota.NewMemory(nil),
		Geofence:    geofence.NewMemory(d),
		Tiles:       tiles.NewMemory(d),
		TileCache:   tilecache.NewMemory(1<<20, time.Minute),
		Keys:        index,
		KeyAdmin:    ks,
		Plans:       ps,
		DataVersion: dataversion.Fixed("fuzz"),
		AdminToken:  fuzzAdmin,
		// One handler for every route the fuzzers send.
		AdminOnPublic: true,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := httpapi.NewServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// problemBody is the part of a problem+json body every 4xx must have.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Field  string `json:"field"`
}

// usage is what GET /v1/quota reports as used by the caller of a request,
// summed over its limits; ok is false if it reports nothing (an unknown
// key, say).
type usage struct {
	used int64
	ok   bool
}

// usedBy asks h for the usage of the caller of req: the same peer and the
// same headers that identify it.
func usedBy(h http.Handler, req *http.Request) usage {
	q := httptest.NewRequest(http.MethodGet, "/v1/quota", nil)
	q.RemoteAddr = req.RemoteAddr
	for _, name := range []string{"X-API-Key", "Authorization", "X-Forwarded-For"} {
		if v := req.Header.Values(name); v != nil {
			q.Header[http.CanonicalHeaderKey(name)] = v
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, q)
	if rec.Code != http.StatusOK {
		return usage{}
	}
	var u struct {
		Limits []struct {
			Used int64 `json:"used"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &u); err != nil {
		return usage{}
	}
	var sum int64
	for _, l := range u.Limits {
		sum += l.Used
	}
	return usage{sum, true}
}

// exchange serves req and checks the answer (see checkAnswer).
func exchange(t *testing.T, h http.Handler, req *http.Request, metered bool) *httptest.ResponseRecorder {
	t.Helper()
	before := usedBy(h, req)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	checkAnswer(t, req, rec, before, usedBy(h, req), metered)
	return rec
}

// checkAnswer fails unless rec is a 200 or 304, or a 4xx problem+json
// with a code (and the field of an invalid parameter); and unless the
// caller's usage grew by the X-RateLimit-Cost of a charged 200 or 304, and
// not at all otherwise. A metered route must not serve anything free.
func checkAnswer(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder, before, after usage, metered bool) {
	t.Helper()
	target := req.Method + " " + req.URL.String()
	served := rec.Code == http.StatusOK || rec.Code == http.StatusNotModified
	switch {
	case served:
	case rec.Code >= 400 && rec.Code < 500:
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%s %v: status %d with Content-Type %q: %s", target, req.Header, rec.Code, ct, rec.Body)
		}
		var p problemBody
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code == "" || p.Status != rec.Code || p.Type == "" || p.Title == "" {
			t.Fatalf("%s %v: status %d with body %s (%v): want a problem with a code", target, req.Header, rec.Code, rec.Body, err)
		}
		if p.Code == "invalid-parameter" && p.Field == "" {
			t.Fatalf("%s %v: an invalid parameter, but which? %s", target, req.Header, rec.Body)
		}
	default:
		t.Fatalf("%s %v: status %d: %s", target, req.Header, rec.Code, rec.Body)
	}

	charged := served && rec.Header().Get("X-Quota-Status") == "charged"
	if metered && served && !charged {
		t.Fatalf("%s %v: served with X-Quota-Status %q", target, req.Header, rec.Header().Get("X-Quota-Status"))
	}
	var cost int64
	if charged {
		var err error
		if cost, err = strconv.ParseInt(rec.Header().Get("X-RateLimit-Cost"), 10, 64); err != nil || cost < 1 {
			t.Fatalf("%s %v: charged, with X-RateLimit-Cost %q", target, req.Header, rec.Header().Get("X-RateLimit-Cost"))
		}
		// Settled down after the work (an empty tile): it costs that.
		if s := rec.Header().Get(quotahttp.HeaderSettledCost); s != "" {
			if cost, err = strconv.ParseInt(s, 10, 64); err != nil || cost < 1 {
				t.Fatalf("%s %v: settled, with %s %q", target, req.Header, quotahttp.HeaderSettledCost, s)
			}
		}
	}
	switch {
	case before.ok && after.ok:
		if got := after.used - before.used; got != cost {
			t.Fatalf("%s %v: status %d, cost %d, but the caller's usage went from %d to %d", target, req.Header, rec.Code, cost, before.used, after.used)
		}
	case charged:
		t.Fatalf("%s %v: charged %d, to a caller whose usage cannot be read", target, req.Header, cost)
	}
}

// get is a GET of target with the headers ("Name", "value", ...).
func get(target string, headers ...string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.RemoteAddr = fuzzPeer
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

func FuzzWithin(f *testing.F) {
	f.Add("2.35", "48.85", "5000", "3")
	f.Add("-73.98", "40.75", "100000", "")
	f.Add("1_0", "0x1p1", "1e3", "01")
	f.Add("180", "-90", "0.5", "1000")
	f.Add("NaN", "+Inf", "-1", "99999999999999999999")
	h := newFuzzServer(f, nil)
	f.Fuzz(func(t *testing.T, lng, lat, radius, limit string) {
		v := url.Values{"lng": {lng}, "lat": {lat}, "radius": {radius}}
		if limit != "" {
			v.Set("limit", limit)
		}
		rec := exchange(t, h, get("/v1/geofence/within?"+v.Encode(), "X-API-Key", fuzzKey), true)
		if rec.Code == http.StatusOK {
			servedPlain(t, "-.0123456789", lng, lat, radius)
			servedPlain(t, "0123456789", limit)
		}
	})
}

func FuzzContains(f *testing.F) {
	f.Add("2.35", "48.85", "")
	f.Add("-118.25", "34.05", "true")
	f.Add("1_0", "01", "1")
	f.Add("0x1p1", " 1", "maybe")
	h := newFuzzServer(f, nil)
	f.Fuzz(func(t *testing.T, lng, lat, geometry string) {
		v := url.Values{"lng": {lng}, "lat": {lat}}
		if geometry != "" {
			v.Set("geometry", geometry)
		}
		if rec := exchange(t, h, get("/v1/geofence/contains?"+v.Encode(), "X-API-Key", fuzzKey), true); rec.Code == http.StatusOK {
			servedPlain(t, "-.0123456789", lng, lat)
		}
	})
}

func FuzzTile(f *testing.F) {
	f.Add("places", "8", "128", "88", "mvt")
	f.Add("counties", "6", "10", "24", "pbf")
	f.Add("countries", "0", "0", "0", "json")
	f.Add("places", "01", "+1", "1_0", "mvt")
	f.Add("roads", "14", "4294967296", "18446744073709551616", "mvt")
	h := newFuzzServer(f, nil)
	f.Fuzz(func(t *testing.T, layer, z, x, y, ext string) {
		target := "/v1/tiles/" + url.PathEscape(layer) + "/" + url.PathEscape(z) + "/" + url.PathEscape(x) + "/" + url.PathEscape(y) + "." + url.PathEscape(ext)
		if rec := exchange(t, h, get(target, "X-API-Key", fuzzKey), true); rec.Code == http.StatusOK {
			servedPlain(t, "0123456789", z, x, y)
		}
	})
}

// servedPlain fails if a number of a served request holds anything but
// the characters of its plain spelling.
func servedPlain(t *testing.T, chars string, numbers ...string) {
	t.Helper()
	for _, s := range numbers {
		if strings.Trim(s, chars) != "" {
			t.Fatalf("%q was read as a number", s)
		}
	}
}

// FuzzRequestTarget sends any request-target that Go's HTTP server would
// read from the wire: every route, with raw paths and queries (repeated,
// badly escaped, on the wrong route). The admin API is asked with its
// token, everything else with fuzzKey.
func FuzzRequestTarget(f *testing.F) {
	for _, s := range []string{
		"/v1/geofence/within?lng=2.35&lat=48.85&radius=5000&limit=3",
		"/v1/geofence/within?lng=2.35&lng=1_0&lat=48.85&radius=5e3",
		"/v1/geofence/contains?lng=%2B1&lat=%zz",
		"/v1/tiles/places/8/128/88.mvt",
		"/v1/tiles/pl%61ces/08/128/88.pbf",
		"/v1/tiles/countries.json",
		"/v1/tiles",
		"/v1/quota",
		"/admin/keys/1",
		"/admin/keys/01/usage",
		"/admin/keys/0x1",
		"/healthz",
		"/assets/../../etc/passwd",
		"/openapi.json",
		"*",
	} {
		f.Add(s)
	}
	h := newFuzzServer(f, nil)
	f.Fuzz(func(t *testing.T, target string) {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: tileapi.test\r\n\r\n")))
		if err != nil {
			return // the server would have refused it before any handler
		}
		req.RemoteAddr = fuzzPeer
		if strings.HasPrefix(req.URL.Path, "/admin") {
			req.Header.Set("Authorization", "Bearer "+fuzzAdmin)
		} else {
			req.Header.Set("X-API-Key", fuzzKey)
		}
		exchange(t, h, req, false)
	})
}

// FuzzKeyHeaders presents any X-API-Key and Authorization, with the
// unknown-key guard on (its 429s are 4xx problems too).
func FuzzKeyHeaders(f *testing.F) {
	f.Add(fuzzKey, "")
	f.Add("", "Bearer "+fuzzKey)
	f.Add("", "bearer  "+fuzzSmallKey+" ")
	f.Add("", "Basic Zm9vOmJhcg==")
	f.Add("tk_3f9a2c1b_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "")
	f.Add("\xff\xfe", "Bearer \x00")
	f.Add("", "Bearer")
	h := newFuzzServer(f, nil)
	f.Fuzz(func(t *testing.T, apiKey, authorization string) {
		req := get("/v1/geofence/within?lng=2.35&lat=48.85&radius=5000")
		if apiKey != "" {
			req.Header.Set("X-API-Key", apiKey)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		exchange(t, h, req, true)
	})
}

// FuzzTileHeaders sends a tile request with any If-None-Match,
// Accept-Encoding and X-Request-Id: a 304 or a 200, charged the same either
// way (the tile is looked up, and its entity tag compared, only after the
// charge).
func FuzzTileHeaders(f *testing.F) {
	const tile = "/v1/tiles/places/0/0/0.mvt"
	h := newFuzzServer(f, nil)
	first := httptest.NewRecorder()
	h.ServeHTTP(first, get(tile, "X-API-Key", fuzzKey))
	etag := first.Header().Get("ETag")
	if first.Code != http.StatusOK || etag == "" {
		f.Fatalf("GET %s: status %d, ETag %q", tile, first.Code, etag)
	}
	for _, s := range []string{etag, "W/" + etag, `"x", ` + etag, "*", `"x"`, ",,,", "W/"} {
		f.Add(s, "gzip", "")
	}
	f.Add("", "br;q=0.5, gzip;q=0, *", "req-1")
	f.Add("", "deflate", strings.Repeat("\x00", 100))
	f.Fuzz(func(t *testing.T, match, acceptEncoding, requestID string) {
		req := get(tile, "X-API-Key", fuzzKey, "Accept-Encoding", acceptEncoding, "X-Request-Id", requestID)
		if match != "" {
			req.Header.Set("If-None-Match", match)
		}
		rec := exchange(t, h, req, true)
		if rec.Code != http.StatusOK && rec.Code != http.StatusNotModified {
			t.Fatalf("%v: status %d: %s", req.Header, rec.Code, rec.Body)
		}
	})
}

// FuzzForwardedFor sends any X-Forwarded-For from a trusted proxy, without
// a key: the anonymous caller is whoever the header names, and is charged
// as such, or the request is a 4xx.
func FuzzForwardedFor(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "203.0.113.7, 192.0.2.1", "2001:db8::1", "[::1]:80", "unknown", "", ",", "1.2.3.4, , 5.6.7.8", "999.1.1.1"} {
		f.Add(s)
	}
	h := newFuzzServer(f, func(c *httpapi.Config) { c.TrustedProxies = []string{"192.0.2.0/24"} })
	f.Fuzz(func(t *testing.T, xff string) {
		req := get(contains)
		req.Header.Set("X-Forwarded-For", xff)
		exchange(t, h, req, true)
	})
}

const contains = "/v1/geofence/contains?lng=2.35&lat=48.85"

// The examples and their kin, over HTTP: a 400 naming the field,
// never a charge.
func TestStrictNumbers(t *testing.T) {
	h := newFuzzServer(t, nil)
	for _, tc := range []struct{ target, field string }{
		{"/v1/geofence/within?lng=1_0&lat=0&radius=10", "lng"},
		{"/v1/geofence/within?lng=0&lat=0&radius=0x1p1", "radius"},
		{"/v1/geofence/within?lng=0&lat=0&radius=1e", "radius"},
		{"/v1/geofence/within?lng=0&lat=0&radius=1.e3", "radius"},
		{"/v1/geofence/within?lng=0&lat=%2B1&radius=10", "lat"},
		{"/v1/geofence/within?lng=0&lat=0&radius=10&limit=01", "limit"},
		{"/v1/geofence/contains?lng=.5&lat=0", "lng"},
		{"/v1/geofence/contains?lng=0&lat=inf", "lat"},
		{"/v1/tiles/places/01/0/0.mvt", "z"},
		{"/v1/tiles/places/1/+1/0.mvt", "x"},
		{"/v1/tiles/places/14/0/4294967296.mvt", "y"},
		{"/admin/keys/01", "id"},
		{"/admin/keys/+1", "id"},
		{"/admin/keys/1_0", "id"},
		{"/admin/keys/0", "id"},
		{"/admin/keys/99999999999999999999", "id"},
	} {
		req := get(tc.target, "X-API-Key", fuzzKey)
		if strings.HasPrefix(tc.target, "/admin") {
			req = get(tc.target, "Authorization", "Bearer "+fuzzAdmin)
		}
		rec := exchange(t, h, req, false)
		var p problemBody
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != http.StatusBadRequest || p.Field != tc.field {
			t.Errorf("%s: status %d, body %s; want a 400 for %s", tc.target, rec.Code, rec.Body, tc.field)
		}
	}
	// The plain spellings are served.
	for _, target := range []string{"/v1/geofence/within?lng=-0&lat=0.0&radius=10.5&limit=1000", "/v1/tiles/places/0/0/0.mvt"} {
		if rec := exchange(t, h, get(target, "X-API-Key", fuzzKey), true); rec.Code != http.StatusOK {
			t.Errorf("%s: status %d: %s", target, rec.Code, rec.Body)
		}
	}
	rec := exchange(t, h, get("/admin/keys/1", "Authorization", "Bearer "+fuzzAdmin), false)
	if rec.Code != http.StatusOK {
		t.Errorf("/admin/keys/1: status %d: %s", rec.Code, rec.Body)
	}
}
