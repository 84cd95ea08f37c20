package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/tiles"
)

// watchedHeaders are the response headers a client acts on: whichever of
// them a response carries must be described on that response in
// openapi.json (kin-openapi checks only the headers a document names).
var watchedHeaders = []string{
	"RateLimit-Policy", "RateLimit",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Cost",
	"X-Quota-Status", "X-Quota-Settled-Cost", "Retry-After",
	"X-Tile-Cache", "ETag", "Cache-Control", "Vary",
	"WWW-Authenticate", "Allow",
}

// contract is openapi.json as kin-openapi loads and validates it, with a
// router over its paths, and the exchanges held against it so far.
type contract struct {
	doc    *openapi3.T
	router routers.Router

	mu        sync.Mutex
	validated int
	driven    map[string]map[int]bool // "GET /v1/tiles" → the statuses seen
}

// loadContract loads openapi.json and validates the document itself.
func loadContract(t *testing.T) *contract { return loadContractFrom(t, openAPI) }

// loadContractFrom loads an OpenAPI document (a server's /openapi.json)
// and validates the document itself.
func loadContractFrom(t *testing.T, document []byte) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(document)
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("openapi.json: router: %v", err)
	}
	return &contract{doc: doc, router: router, driven: map[string]map[int]bool{}}
}

// exchange is one request of the contract test and the status it is made
// to get.
type exchange struct {
	admin        bool // to the admin listener
	method, path string
	headers      []string // "Name", "value", ...
	body         string
	status       int
	// refused: the document itself refuses the request (a parameter out
	// of its schema), as the server does with its 400.
	refused bool
}

// key sets the API key of plan on x.
func (x exchange) key(plan string) exchange {
	x.headers = append(slices.Clip(x.headers), key(plan)...)
	return x
}

var adminAuth = []string{"Authorization", "Bearer admin-secret"}

func get(path string, status int) exchange {
	return exchange{method: http.MethodGet, path: path, status: status}
}

func adminCall(method, path, body string, status int) exchange {
	return exchange{admin: true, method: method, path: path, body: body, status: status, headers: adminAuth}
}

// check sends x to e and holds the response against the document: the
// route and the request are in it, the status is one the operation
// answers, every header it describes matches its schema, the body matches
// the schema of its media type, a JSON body has one, and every watched
// header the response carries is described. It returns the response, its
// body read.
func (c *contract) check(t *testing.T, e *env, x exchange) (*http.Response, []byte) {
	t.Helper()
	srv := e.srv
	if x.admin {
		srv = e.admin
	}
	name := x.method + " " + x.path
	req, err := http.NewRequest(x.method, srv.URL+x.path, strings.NewReader(x.body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(x.headers); i += 2 {
		if x.headers[i] == "Host" {
			req.Host = x.headers[i+1]
			continue
		}
		req.Header.Set(x.headers[i], x.headers[i+1])
	}
	if x.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if resp.StatusCode != x.status {
		t.Errorf("%s: status %d, want %d (the exchange no longer drives its status): %s", name, resp.StatusCode, x.status, body)
		return resp, body
	}
	if errs := c.validate(x, req, resp, body); len(errs) > 0 {
		for _, err := range errs {
			t.Errorf("%s → %d: %v", name, resp.StatusCode, err)
		}
	}
	return resp, body
}

// validate returns what the document and the exchange disagree on.
func (c *contract) validate(x exchange, sent *http.Request, resp *http.Response, body []byte) []error {
	// The request as the validator reads it: its body again, and the Host
	// the client sent.
	req := sent.Clone(context.Background())
	req.Body = io.NopCloser(strings.NewReader(x.body))
	req.URL = &url.URL{Scheme: "http", Host: sent.URL.Host, Path: sent.URL.Path, RawPath: sent.URL.RawPath, RawQuery: sent.URL.RawQuery}
	route, params, err := c.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrMethodNotAllowed) && resp.StatusCode == http.StatusMethodNotAllowed:
		return c.validateNotAllowed(req, resp, body)
	case errors.Is(err, routers.ErrPathNotFound) && resp.StatusCode == http.StatusNotFound:
		return c.validateAgainst(req, resp, body, c.doc.Components.Responses["NotFound"], "components/responses/NotFound")
	case err != nil:
		return []error{fmt.Errorf("the route is not in openapi.json: %v", err)}
	}
	c.drove(route, resp.StatusCode)
	var errs []error
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	switch err := openapi3filter.ValidateRequest(context.Background(), in); {
	case err != nil && !x.refused:
		errs = append(errs, fmt.Errorf("the document refuses a request the server takes: %v", err))
	case err == nil && x.refused:
		errs = append(errs, errors.New("the document allows a request the server refuses as invalid"))
	}
	ref := route.Operation.Responses.Status(resp.StatusCode)
	if ref == nil {
		return append(errs, fmt.Errorf("status %d is not among the operation's responses", resp.StatusCode))
	}
	return append(errs, c.validateResponse(in, resp, body, ref.Value)...)
}

// validateResponse holds resp against the response object r. Where
// kin-openapi validates nothing (a HEAD, a 304), r is given to it as the
// 200 of an operation of its own, so its headers are still checked.
func (c *contract) validateResponse(in *openapi3filter.RequestValidationInput, resp *http.Response, body []byte, r *openapi3.Response) []error {
	c.mu.Lock()
	c.validated++
	c.mu.Unlock()
	var errs []error
	if in.Request.Method == http.MethodHead && len(body) > 0 {
		errs = append(errs, fmt.Errorf("a HEAD answered %d bytes of body", len(body)))
	}
	status := resp.StatusCode
	if in.Request.Method == http.MethodHead || status == http.StatusNotModified {
		get := in.Request.Clone(context.Background())
		get.Method = http.MethodGet
		op := *in.Route.Operation
		op.Responses = openapi3.NewResponses(openapi3.WithStatus(200, &openapi3.ResponseRef{Value: r}))
		route := *in.Route
		route.Operation = &op
		opts := *in.Options
		opts.ExcludeResponseBody = true
		in = &openapi3filter.RequestValidationInput{Request: get, PathParams: in.PathParams, Route: &route, Options: &opts}
		status = http.StatusOK
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 resp.Header,
		Options:                in.Options,
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, err)
	}
	for _, h := range watchedHeaders {
		if _, sent := resp.Header[http.CanonicalHeaderKey(h)]; sent && headerOf(r, h) == nil {
			errs = append(errs, fmt.Errorf("header %s (%q) is not described", h, resp.Header.Get(h)))
		}
	}
	if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "json") && len(body) > 0 {
		if mt := r.Content.Get(ct); mt == nil || mt.Schema == nil {
			errs = append(errs, fmt.Errorf("the %s body has no schema", ct))
		}
	}
	return errs
}

// headerOf returns the header name of r, matched as HTTP matches names.
func headerOf(r *openapi3.Response, name string) *openapi3.HeaderRef {
	for k, h := range r.Headers {
		if strings.EqualFold(k, name) {
			return h
		}
	}
	return nil
}

// validateNotAllowed holds a 405 against components/responses/
// MethodNotAllowed, and its Allow against the methods the document
// describes for the path.
func (c *contract) validateNotAllowed(req *http.Request, resp *http.Response, body []byte) []error {
	errs := c.validateAgainst(req, resp, body, c.doc.Components.Responses["MethodNotAllowed"], "components/responses/MethodNotAllowed")
	var described []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		r := req.Clone(context.Background())
		r.Method = m
		if _, _, err := c.router.FindRoute(r); err == nil {
			described = append(described, m)
		}
	}
	allow := strings.Split(resp.Header.Get("Allow"), ", ")
	slices.Sort(allow)
	slices.Sort(described)
	if !slices.Equal(allow, described) {
		errs = append(errs, fmt.Errorf("Allow %q, but the document describes %q for the path", resp.Header.Get("Allow"), described))
	}
	return errs
}

// validateAgainst holds an answer to a route the document lacks (a 404, a
// 405) against the component response ref, named name.
func (c *contract) validateAgainst(req *http.Request, resp *http.Response, body []byte, ref *openapi3.ResponseRef, name string) []error {
	if ref == nil || ref.Value == nil {
		return []error{fmt.Errorf("%d for a route the document lacks, and no %s", resp.StatusCode, name)}
	}
	op := &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(resp.StatusCode, ref))}
	in := &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: c.doc, Path: req.URL.Path, Method: req.Method, Operation: op},
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	return c.validateResponse(in, resp, body, ref.Value)
}

// drove records that route answered status.
func (c *contract) drove(route *routers.Route, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := route.Method + " " + route.Path
	if c.driven[k] == nil {
		c.driven[k] = map[int]bool{}
	}
	c.driven[k][status] = true
}

// undriven are the (operation, status) pairs of openapi.json that no
// exchange drives, each for a reason: the statuses a test cannot provoke
// without a fault of the server's own making. Every other pair the
// document describes must be driven.
var undriven = map[string]string{
	// The catalog, TileJSON and the list of geofence sets are built in
	// memory from the configuration, after the charge: nothing they depend
	// on can fail. Their 500 is there for a bug (a JSON encoding that
	// fails, a recovered panic), refunded as every 500 is.
	"GET /v1/tiles 500":               "built from memory: only a bug fails it",
	"HEAD /v1/tiles 500":              "built from memory: only a bug fails it",
	"GET /v1/tiles/{layer}.json 500":  "built from memory: only a bug fails it",
	"HEAD /v1/tiles/{layer}.json 500": "built from memory: only a bug fails it",
	"GET /v1/geofence 500":            "built from memory: only a bug fails it",
	"HEAD /v1/geofence 500":           "built from memory: only a bug fails it",
}

// covered fails t for every operation of the document no exchange reached,
// and every status an operation describes that no exchange drove, unless
// undriven says why none can; and for an entry of undriven that is driven
// after all, or names nothing the document describes.
func (c *contract) covered(t *testing.T) {
	t.Helper()
	described := map[string]bool{}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			k := method + " " + path
			if len(c.driven[k]) == 0 {
				t.Errorf("%s is in openapi.json, and no exchange called it", k)
				continue
			}
			for code := range op.Responses.Map() {
				var status int
				if _, err := fmt.Sscan(code, &status); err != nil {
					t.Errorf("%s: response %q is no status", k, code)
					continue
				}
				pair := k + " " + code
				described[pair] = true
				_, excused := undriven[pair]
				switch driven := c.driven[k][status]; {
				case !driven && !excused:
					t.Errorf("%s: %s is described, and no exchange drives it", k, code)
				case driven && excused:
					t.Errorf("%s: %s is driven, yet listed in undriven", k, code)
				}
			}
		}
	}
	for pair := range undriven {
		if !described[pair] {
			t.Errorf("undriven lists %s, which openapi.json does not describe", pair)
		}
	}
}

// The OpenAPI document is held against live answers: every route of both
// listeners is called over HTTP, driven to each status it can answer
// (HEAD too), and each response validated with kin-openapi against
// openapi.json, on the in-memory backends and on PostGIS.
//
// On each backend, every operation is called and every status it
// describes is driven, but for the few of undriven.
func TestContract(t *testing.T) {
	for _, b := range []struct {
		name string
		opts []option
	}{{"memory", nil}, {"postgis", []option{withPostGIS()}}} {
		t.Run(b.name, func(t *testing.T) {
			c := loadContract(t)
			for _, sc := range contractScenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, c, b.opts) })
			}
			t.Logf("%d responses validated", c.validated)
			if !t.Failed() {
				c.covered(t)
			}
		})
	}
}

// contractScenarios each start a server configured to reach some statuses,
// and drive them.
var contractScenarios = []struct {
	name string
	run  func(t *testing.T, c *contract, backend []option)
}{
	{"served", contractServed},
	{"refused", contractRefused},
	{"quota", contractQuota},
	{"keys", contractKeys},
	{"restrictions", contractRestrictions},
	{"admin", contractAdmin},
	{"failures", contractFailures},
	{"tokens", contractTokens},
	{"usage", contractUsage},
	{"usage export", contractUsageExport},
}

// The 200s (and a 304) of every route, and HEAD on every GET.
func contractServed(t *testing.T, c *contract, backend []option) {
	e := newEnv(t, backend...)
	for _, x := range []exchange{
		get("/v1/geofence/within?lng=2.35&lat=48.85&radius=5000", 200).key("std"),
		get("/v1/geofence/within?lng=2.35e0&lat=4.885E1&radius=5e3&limit=10", 200).key("std"),
		get("/v1/geofence/contains?lng=25&lat=-30", 200).key("std"),
		get("/v1/geofence/contains?lng=25&lat=-30&geometry=true", 200).key("std"),
		get("/v1/geofence/contains?lng=-118.25&lat=34.05&geometry=false", 200), // anonymous
		get("/v1/geofence/contains?lng=0&lat=0", 200).key("std"),
		get("/v1/geofence/within?lng=2.35&lat=48.85&radius=5000&geometry=true", 200).key("std"),
		get("/v1/geofence", 200).key("std"),
		get("/v1/geofence/places/within?lng=2.35&lat=48.85&radius=5000", 200).key("std"),
		get("/v1/geofence/boundaries/contains?lng=25&lat=-30&geometry=true", 200).key("std"),
		get("/v1/tiles", 200).key("std"),
		get("/v1/tiles/places.json", 200).key("std"),
		get("/v1/tiles/counties.json", 200).key("std"),
		get("/v1/quota", 200).key("std"),
		get("/v1/quota", 200).key("daily"),
		get("/v1/quota", 200),
		get("/healthz", 200),
		get("/readyz", 200),
		get("/metrics", 200),
		get("/openapi.json", 200),
		{admin: true, method: http.MethodGet, path: "/healthz", status: 200},
		{admin: true, method: http.MethodGet, path: "/readyz", status: 200},
	} {
		c.check(t, e, x)
		x.method = http.MethodHead
		c.check(t, e, x)
	}
	for _, layer := range tiles.LayerNames() {
		for _, ext := range []string{"mvt", "pbf"} {
			x := get("/v1/tiles/"+layer+"/3/1/3."+ext, 200).key("pro")
			resp, _ := c.check(t, e, x) // a miss
			e.cacheWritten(t)
			c.check(t, e, x) // a hit
			x.headers = append(x.headers, "If-None-Match", resp.Header.Get("ETag"))
			x.status = http.StatusNotModified
			c.check(t, e, x)
			x.method = http.MethodHead
			c.check(t, e, x)
			x = get(x.path, 200).key("pro")
			x.method = http.MethodHead
			c.check(t, e, x)
		}
	}
	// TileJSON and the catalog with a public URL configured: shared caches
	// may keep them.
	public := newEnv(t, append(backend, with(func(c *Config) { c.PublicURL = "https://tiles.example.com" }))...)
	c.check(t, public, get("/v1/tiles", 200))
	c.check(t, public, get("/v1/tiles/countries.json", 200))
	// Without it, a Host the server has not checked: URLs of the address
	// the connection reached.
	for _, path := range []string{"/v1/tiles", "/v1/tiles/countries.json"} {
		x := get(path, 200)
		x.headers = append(x.headers, "Host", "unchecked.example")
		c.check(t, e, x)
	}
	// Shadow mode serves what it would refuse.
	shadow := newEnv(t, append(backend, with(func(c *Config) { c.Shadow = true }))...)
	for range 6 {
		c.check(t, shadow, get(contains, 200).key("five"))
	}
}

// The 400s, 404s and 405s.
func contractRefused(t *testing.T, c *contract, backend []option) {
	e := newEnv(t, append(backend, with(func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32"} }))...)
	for _, x := range []exchange{
		{method: "GET", path: "/v1/geofence/within?lng=abc&lat=48.85&radius=5000", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/within?lng=200&lat=48.85&radius=5000", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/within?lng=2.35&lat=48.85", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/within?lng=2.35&lat=48.85&radius=5000&limit=0", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/within?lng=1_0&lat=48.85&radius=5000", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/contains?lng=2.35&lat=-91", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/contains?lng=2.35&lat=48.85&geometry=yes", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/nosuchset/within?lng=2.35&lat=48.85&radius=5000", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/places/contains?lng=2.35&lat=48.85", status: 400, refused: true},
		{method: "GET", path: "/v1/geofence/boundaries/within?lng=2.35&lat=48.85&radius=5000", status: 400, refused: true},
		{method: "GET", path: "/v1/tiles/nope.json", status: 400, refused: true},
		{method: "GET", path: "/v1/tiles/nope/3/1/3.mvt", status: 400, refused: true},
		{method: "GET", path: "/v1/tiles/places/15/1/3.mvt", status: 400, refused: true},
		{method: "GET", path: "/v1/tiles/places/3/-1/3.pbf", status: 400, refused: true},
		{method: "GET", path: "/v1/tiles/places/3/8/3.mvt", status: 400},   // x beyond 2^z: no schema says so
		{method: "GET", path: "/v1/tiles/counties/1/0/0.mvt", status: 400}, // below the layer's zoom
		{method: "GET", path: "/v1/tiles/places.json", headers: []string{"X-Forwarded-For", "not-an-address"}, status: 400},
		{method: "GET", path: "/v1/tiles", headers: []string{"X-Forwarded-For", "not-an-address"}, status: 400},
		{method: "GET", path: contains, headers: []string{"X-Forwarded-For", "not-an-address"}, status: 400},
		{method: "GET", path: "/v1/nope", status: 404},
		{method: "GET", path: "/admin/keys", status: 404}, // not on the public listener
		{method: "POST", path: "/v1/tiles", status: 405},
		{method: "DELETE", path: contains, status: 405},
		{method: "PUT", path: "/healthz", status: 405},
		{method: "POST", path: "/v1/tiles/places/3/1/3.mvt", status: 405},
		{admin: true, method: "PATCH", path: "/admin/keys/1", headers: adminAuth, status: 405},
		{admin: true, method: "POST", path: "/admin/keys/1/plan", headers: adminAuth, status: 405},
	} {
		if x.method == http.MethodGet {
			c.both(t, e, x)
		} else {
			c.check(t, e, x)
		}
	}
}

// The 422s and 429s of the quota.
func contractQuota(t *testing.T, c *contract, backend []option) {
	e := newEnv(t, backend...)
	for _, x := range []exchange{
		get("/v1/geofence/within?lng=2.35&lat=48.85&radius=30000", 422).key("five"),        // radius-exceeds-plan
		get("/v1/geofence/places/within?lng=2.35&lat=48.85&radius=30000", 422).key("five"), // radius-exceeds-plan
		get("/v1/geofence/within?lng=2.35&lat=48.85&radius=20000", 422).key("five"),        // cost-exceeds-plan
		get("/v1/tiles/countries/0/0/0.mvt", 422).key("five"),
		get("/v1/tiles/countries/0/0/0.pbf", 422).key("five"),
	} {
		c.both(t, e, x)
	}
	for i := range 6 {
		status := 200
		if i == 5 {
			status = 429 // quota-exceeded, and quota-exhausted for the day
		}
		c.check(t, e, get(contains, status).key("five"))
		c.check(t, e, get("/v1/geofence/within?lng=2.35&lat=48.85&radius=100", status).key("daily"))
	}
	for _, path := range meteredPaths[:len(meteredPaths)-1] {
		// A tile the plan can afford (a z10 place costs 1): a z3 one costs
		// 16, above the plan's max, which is a 422 whatever is spent.
		path = strings.Replace(path, "/3/1/3.", "/10/512/340.", 1)
		c.both(t, e, get(path, 429).key("five"))
	}
	c.check(t, e, get("/v1/quota", 200).key("five"))

	// Over-plan on every route of a flat price: a plan whose flat price is
	// above its max.
	dear := newEnv(t, append(backend, func(t *testing.T, c *Config) {
		var err error
		if c.Plans, err = plans.Parse([]byte(dearPlans)); err != nil {
			t.Fatal(err)
		}
	})...)
	for _, path := range flatPaths {
		c.both(t, dear, get(path, 422).key("five"))
	}

	// concurrency-exceeded: plan two holds two requests in flight.
	g := newSlowGeofence(t)
	slow := newEnv(t, append(backend, with(func(c *Config) { c.Geofence = g }))...)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.check(t, slow, get(contains, 200).key("two")) })
	}
	g.waitInFlight(t, 2)
	c.both(t, slow, get(contains, 429).key("two"))
	g.end()
	wg.Wait()
}

// Requests of the metered routes, by what they do.
var (
	// searchPaths query the spatial data: a request of each search route.
	searchPaths = []string{
		"/v1/geofence/within?lng=2.35&lat=48.85&radius=100", contains,
		"/v1/geofence/places/within?lng=2.35&lat=48.85&radius=100", "/v1/geofence/boundaries/contains?lng=2.35&lat=48.85",
	}
	// flatPaths cost the plan's flat price.
	flatPaths = []string{contains, "/v1/geofence/boundaries/contains?lng=2.35&lat=48.85", "/v1/geofence", "/v1/tiles", "/v1/tiles/places.json"}
	// meteredPaths are a request of each metered route (and /v1/quota, last,
	// which reads a key as they do).
	meteredPaths = slices.Concat(searchPaths, []string{
		"/v1/geofence", "/v1/tiles", "/v1/tiles/places.json", "/v1/tiles/places/3/1/3.mvt", "/v1/tiles/places/3/1/3.pbf",
		"/v1/quota",
	})
)

// both checks x, then the HEAD that stands for it: the same answer
// without the body.
func (c *contract) both(t *testing.T, e *env, x exchange) {
	t.Helper()
	c.check(t, e, x)
	x.method = http.MethodHead
	c.check(t, e, x)
}

// The 401s, 403s and too-many-unknown-keys of every route that reads a key.
func contractKeys(t *testing.T, c *contract, backend []option) {
	closed := with(func(c *Config) { c.NoAnonymous, c.UnknownKeys = true, 1 })
	e := newEnv(t, append(backend, closed)...)
	ctx := context.Background()
	if _, err := e.keys.Add(ctx, "gold", "gold", "key-gold"); err != nil { // a plan not configured
		t.Fatal(err)
	}
	k, err := e.keys.Lookup(ctx, hashOf("key-ten"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	unknown := newEnv(t, append(backend, with(func(c *Config) { c.UnknownKeys = 1000 }))...)
	proxied := newEnv(t, append(backend, with(func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32"} }))...)
	c.check(t, e, get(contains, 401).key("made-up")) // the one unknown key allowed
	// An expired key, a rotated secret, a secret key from a browser and a
	// secret whose checksum is wrong.
	expired, expiredSecret, err := e.keys.CreateKind(ctx, keys.Secret, "expired", "std", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.SetExpiry(ctx, expired.ID, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	rotated, rotatedSecret, err := e.keys.CreateKind(ctx, keys.Publishable, "rotated", "std", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.keys.Reroll(ctx, rotated.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, path := range meteredPaths {
		c.both(t, e, exchange{method: http.MethodGet, path: path, status: 401, headers: []string{"X-API-Key", expiredSecret}}) // expired-key
		c.both(t, e, exchange{method: http.MethodGet, path: path, status: 401, headers: []string{"X-API-Key", rotatedSecret}}) // rotated-key
		c.both(t, e, exchange{method: http.MethodGet, path: path, status: 403,
			headers: []string{"X-API-Key", expiredSecret, "Origin", "https://app.example.com"}}) // secret-key-in-browser
		c.both(t, e, exchange{method: http.MethodGet, path: path, status: 401, headers: []string{"X-API-Key", expiredSecret + "x"}}) // a wrong checksum
	}
	for i, path := range meteredPaths {
		c.both(t, e, get(path, 401))                            // missing-key
		c.both(t, e, get(path, 403).key("ten"))                 // revoked-key
		c.both(t, e, get(path, 403).key("gold"))                // unknown-plan
		c.both(t, e, get(path, 429).key(fmt.Sprint("new-", i))) // too-many-unknown-keys
		c.both(t, unknown, get(path, 401).key(fmt.Sprint("made-up-", i)))
		bearer := get(path, 200)
		bearer.headers = []string{"Authorization", "Bearer key-std"}
		c.check(t, e, bearer)
		noAddress := get(path, 400) // no-client-address
		noAddress.headers = []string{"X-Forwarded-For", "not-an-address"}
		c.both(t, proxied, noAddress)
	}
}

// The 403s of a key's restrictions, on every route that reads a key.
func contractRestrictions(t *testing.T, c *contract, backend []option) {
	e := newEnv(t, backend...)
	ctx := context.Background()
	restrict := func(plan, restrictions string) {
		t.Helper()
		k, err := e.keys.Lookup(ctx, hashOf("key-"+plan))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.keys.SetRestrictions(ctx, k.ID, []byte(restrictions)); err != nil {
			t.Fatal(err)
		}
	}
	restrict("std", `{"origins":["https://app.example.com"]}`)
	restrict("pro", `{"networks":["203.0.113.0/24"]}`)
	restrict("ten", `{"routes":["within"]}`)
	restrict("two", `{"layers":["counties"],"sets":["boundaries"]}`)
	restrict("work", `{"origins":["*"]}`) // stored by something that did not validate it
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, path := range meteredPaths {
		c.both(t, e, get(path, 403).key("std")) // origin-not-allowed
		fromApp := get(path, 200).key("std")
		fromApp.headers = append(fromApp.headers, "Origin", "https://app.example.com")
		c.check(t, e, fromApp)
		c.both(t, e, get(path, 403).key("pro"))  // network-not-allowed
		c.both(t, e, get(path, 403).key("work")) // invalid-restrictions
		if !strings.Contains(path, "/within") {
			c.both(t, e, get(path, 403).key("ten")) // route-not-allowed
		}
	}
	c.both(t, e, get("/v1/tiles/places.json", 403).key("two"))                             // layer-not-allowed
	c.both(t, e, get("/v1/tiles/places/3/1/3.mvt", 403).key("two"))                        // layer-not-allowed
	c.both(t, e, get("/v1/geofence/within?lng=2.35&lat=48.85&radius=100", 403).key("two")) // set-not-allowed
}

// Every route of the admin API, to each of its statuses.
func contractAdmin(t *testing.T, c *contract, backend []option) {
	e := newEnv(t, backend...)
	if _, err := e.keys.Add(context.Background(), "gold", "gold", "key-gold"); err != nil {
		t.Fatal(err)
	}
	gold := "/admin/keys/" + itoa(int64(len(testKeyPlans)+1))
	_, body := c.check(t, e, adminCall("POST", "/admin/keys", `{"name":"acme","plan":"five"}`, 201))
	id := extractID(t, body)
	k := "/admin/keys/" + id
	_, body = c.check(t, e, adminCall("POST", "/admin/customers", `{"name":"Acme","plan":"std"}`, 201))
	cid := extractID(t, body)
	customer := "/admin/customers/" + cid
	goldCustomer, err := e.keys.CreateCustomer(context.Background(), "Gold", "gold")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []exchange{
		adminCall("POST", "/admin/keys", `{"name":"x","plan":"nope"}`, 400),
		{admin: true, method: "POST", path: "/admin/keys", body: `{"name":`, headers: adminAuth, status: 400, refused: true},
		{admin: true, method: "POST", path: "/admin/keys", body: `{"plan":"five"}`, status: 401},
		{admin: true, method: "GET", path: "/admin/keys", headers: []string{"Authorization", "Bearer wrong"}, status: 401},
		adminCall("GET", "/admin/keys", "", 200),
		adminCall("HEAD", "/admin/keys", "", 200),
		adminCall("GET", k, "", 200),
		adminCall("HEAD", k, "", 200),
		adminCall("GET", "/admin/keys/999999", "", 404),
		adminCall("HEAD", "/admin/keys/999999", "", 404),
		{admin: true, method: "GET", path: "/admin/keys/abc", headers: adminAuth, status: 400, refused: true},
		{admin: true, method: "GET", path: "/admin/keys/0", headers: adminAuth, status: 400, refused: true},
		adminCall("PUT", k+"/plan", `{"plan":"std"}`, 200),
		adminCall("PUT", k+"/plan", `{"plan":"nope"}`, 400),
		adminCall("PUT", "/admin/keys/999999/plan", `{"plan":"std"}`, 404),
		adminCall("PUT", k+"/overrides", `{"limits":[{"name":"day","max":50,"window":"1h"}],"max_in_flight":3}`, 200),
		adminCall("GET", k, "", 200),
		{admin: true, method: "PUT", path: k + "/overrides", body: `{"limits":[{"name":"day","max":0,"window":"1h"}]}`, headers: adminAuth, status: 400, refused: true},
		adminCall("PUT", k+"/overrides", `{}`, 400),
		adminCall("PUT", gold+"/overrides", `{"max_in_flight":3}`, 403),
		adminCall("PUT", "/admin/keys/999999/overrides", `{"max_in_flight":3}`, 404),
		adminCall("DELETE", k+"/overrides", "", 200),
		adminCall("DELETE", "/admin/keys/999999/overrides", "", 404),
		adminCall("PUT", k+"/restrictions", `{"origins":["https://*.example.com"],"allow_no_origin":true,"networks":["127.0.0.0/8"],"routes":["tiles"],"layers":["places"],"sets":["places"]}`, 200),
		adminCall("GET", k, "", 200),
		{admin: true, method: "PUT", path: k + "/restrictions", body: `{"routes":["tile"]}`, headers: adminAuth, status: 400, refused: true},
		adminCall("PUT", k+"/restrictions", `{"origins":["https://*.com"]}`, 400),
		adminCall("PUT", k+"/restrictions", `{}`, 400),
		adminCall("PUT", "/admin/keys/999999/restrictions", `{"routes":["tiles"]}`, 404),
		adminCall("DELETE", k+"/restrictions", "", 200),
		adminCall("DELETE", "/admin/keys/999999/restrictions", "", 404),
		adminCall("GET", k+"/usage", "", 200),
		adminCall("HEAD", k+"/usage", "", 200),
		adminCall("GET", "/admin/keys/999999/usage", "", 404),
		adminCall("GET", gold+"/usage", "", 403),
		adminCall("HEAD", gold+"/usage", "", 403),
		adminCall("HEAD", "/admin/keys/999999/usage", "", 404),
		adminCall("DELETE", k+"/usage", "", 204),
		adminCall("DELETE", "/admin/keys/999999/usage", "", 404),
		adminCall("PUT", k+"/expiry", `{"expires_at":"2030-01-01T00:00:00Z"}`, 200),
		adminCall("GET", k, "", 200),
		adminCall("PUT", k+"/expiry", `{"expires_at":null}`, 200),
		{admin: true, method: "PUT", path: k + "/expiry", body: `{}`, headers: adminAuth, status: 400, refused: true},
		adminCall("PUT", "/admin/keys/999999/expiry", `{"expires_at":null}`, 404),
		adminCall("POST", k+"/reroll", `{"overlap":"1h"}`, 200),
		adminCall("GET", k, "", 200),
		adminCall("POST", k+"/reroll", "", 200),
		adminCall("POST", k+"/reroll", `{"overlap":"-1s"}`, 400),
		adminCall("POST", "/admin/keys/999999/reroll", `{}`, 404),
		adminCall("POST", "/admin/keys", `{"name":"web","plan":"five","kind":"publishable"}`, 201),
		adminCall("POST", "/admin/customers", `{"name":"x","plan":"nope"}`, 400),
		adminCall("POST", "/admin/customers", `{"name":"x","plan":"anonymous"}`, 400),
		adminCall("POST", "/admin/customers", `{"name":" ","plan":"std"}`, 400),
		{admin: true, method: "POST", path: "/admin/customers", body: `{"name":"","plan":"std"}`, headers: adminAuth, status: 400, refused: true},
		{admin: true, method: "POST", path: "/admin/customers", body: `{"plan":"std"}`, headers: adminAuth, status: 400, refused: true},
		adminCall("GET", "/admin/customers", "", 200),
		adminCall("HEAD", "/admin/customers", "", 200),
		adminCall("GET", customer, "", 200),
		adminCall("HEAD", customer, "", 200),
		adminCall("GET", "/admin/customers/"+itoa(goldCustomer.ID), "", 403), // unknown-plan
		adminCall("HEAD", "/admin/customers/"+itoa(goldCustomer.ID), "", 403),
		adminCall("GET", "/admin/customers/999999", "", 404),
		adminCall("HEAD", "/admin/customers/999999", "", 404),
		{admin: true, method: "GET", path: "/admin/customers/abc", headers: adminAuth, status: 400, refused: true},
		adminCall("PUT", customer+"/plan", `{"plan":"five"}`, 200),
		adminCall("PUT", customer+"/plan", `{"plan":"nope"}`, 400),
		adminCall("PUT", "/admin/customers/999999/plan", `{"plan":"five"}`, 404),
		adminCall("PUT", customer+"/name", `{"name":"Acme Ltd"}`, 200),
		adminCall("PUT", customer+"/name", `{"name":" "}`, 400),
		adminCall("PUT", "/admin/customers/999999/name", `{"name":"x"}`, 404),
		adminCall("PUT", k+"/customer", `{"customer_id":`+cid+`}`, 200),
		adminCall("GET", k, "", 200),
		adminCall("PUT", k+"/customer", `{"customer_id":999999}`, 400),
		adminCall("PUT", k+"/customer", `{"customer_id":null}`, 200),
		{admin: true, method: "PUT", path: k + "/customer", body: `{}`, headers: adminAuth, status: 400, refused: true},
		{admin: true, method: "PUT", path: k + "/customer", body: `{"customer_id":0}`, headers: adminAuth, status: 400, refused: true},
		adminCall("PUT", "/admin/keys/999999/customer", `{"customer_id":null}`, 404),
		adminCall("POST", "/admin/keys", `{"plan":"five","customer_id":`+cid+`}`, 201),
		adminCall("POST", "/admin/keys", `{"plan":"five","customer_id":999999}`, 400),
		adminCall("DELETE", k, "", 200),
		adminCall("DELETE", "/admin/keys/999999", "", 404),
	} {
		c.check(t, e, x)
	}
	// Each route refuses a bad id, a missing token, an address that failed
	// too often (even with the token), and a key store that fails.
	down := newEnv(t, append(backend, with(func(c *Config) { c.KeyAdmin = keys.NewPostgres(deadPostgres(t)) }))...)
	for _, op := range adminOps {
		path := strings.ReplaceAll(op.path, "{id}", "1")
		if strings.Contains(op.path, "{id}") {
			x := adminCall(op.method, strings.ReplaceAll(op.path, "{id}", "abc"), op.body, 400)
			x.refused = true
			c.check(t, e, x)
		}
		guarded := newEnv(t, backend...)
		c.check(t, guarded, exchange{admin: true, method: op.method, path: path, body: op.body, status: 401})
		for range adminFailures - 1 {
			send(t, guarded.admin, op.method, path, strings.NewReader(op.body), "Authorization", "Bearer wrong")
		}
		c.check(t, guarded, adminCall(op.method, path, op.body, 429))
		c.check(t, down, adminCall(op.method, path, op.body, 503)) // keys-unavailable
	}
	// No admin token configured: the admin API does not exist.
	off := newEnv(t, append(backend, with(func(c *Config) { c.AdminToken = "" }))...)
	c.check(t, off, adminCall("GET", "/admin/keys", "", 404))
	c.check(t, off, adminCall("POST", "/admin/keys", `{"plan":"five"}`, 404))
	c.check(t, off, adminCall("GET", "/admin/customers", "", 404))
	c.check(t, off, adminCall("HEAD", "/admin/customers", "", 404))
	c.check(t, off, adminCall("POST", "/admin/customers", `{"name":"Acme","plan":"five"}`, 404))
}

// adminOps are the operations of the admin API, with a body each takes.
var adminOps = []struct{ method, path, body string }{
	{"POST", "/admin/keys", `{"plan":"five"}`},
	{"GET", "/admin/keys", ""},
	{"HEAD", "/admin/keys", ""},
	{"GET", "/admin/keys/{id}", ""},
	{"HEAD", "/admin/keys/{id}", ""},
	{"DELETE", "/admin/keys/{id}", ""},
	{"PUT", "/admin/keys/{id}/plan", `{"plan":"std"}`},
	{"PUT", "/admin/keys/{id}/overrides", `{"max_in_flight":3}`},
	{"DELETE", "/admin/keys/{id}/overrides", ""},
	{"PUT", "/admin/keys/{id}/restrictions", `{"routes":["tiles"]}`},
	{"DELETE", "/admin/keys/{id}/restrictions", ""},
	{"GET", "/admin/keys/{id}/usage", ""},
	{"HEAD", "/admin/keys/{id}/usage", ""},
	{"DELETE", "/admin/keys/{id}/usage", ""},
	{"PUT", "/admin/keys/{id}/expiry", `{"expires_at":null}`},
	{"POST", "/admin/keys/{id}/reroll", `{"overlap":"1h"}`},
	{"PUT", "/admin/keys/{id}/customer", `{"customer_id":null}`},
	{"POST", "/admin/customers", `{"name":"Acme","plan":"std"}`},
	{"GET", "/admin/customers", ""},
	{"HEAD", "/admin/customers", ""},
	{"GET", "/admin/customers/{id}", ""},
	{"HEAD", "/admin/customers/{id}", ""},
	{"PUT", "/admin/customers/{id}/plan", `{"plan":"std"}`},
	{"PUT", "/admin/customers/{id}/name", `{"name":"Acme Ltd"}`},
}

// dearPlans has a plan five whose flat price is above its max: every route
// is over it.
const dearPlans = `{"plans": [{"name": "five", "max_radius_m": 20000, "limits": [{"name": "ten-seconds", "max": 5, "window": "10s"}],
	"cost": {"radius_unit_m": 2000, "hit_divisor": 4, "flat": 6,
	         "tiles": {"places": {"ref_zoom": 10, "max": 16}, "counties": {"ref_zoom": 8, "max": 16}, "countries": {"ref_zoom": 4, "max": 8}}}}]}`

// emptySchema is a pool on a database schema without tables: every query
// of the dataset or the keys fails in the database.
func emptySchema(t *testing.T) *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), spatialtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// deadPostgres is a pool on a port where no database listens.
func deadPostgres(t *testing.T) *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/tileapi?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// extractID reads the id of a key from its JSON.
func extractID(t *testing.T, body []byte) string {
	t.Helper()
	_, rest, ok := bytes.Cut(body, []byte(`"id":`))
	if !ok {
		t.Fatalf("no id in %s", body)
	}
	end := bytes.IndexAny(rest, ",}")
	return string(rest[:end])
}

// The 500s, 503s and 504s that configuration reaches: dependencies that
// fail for real (a closed port, a schema without tables), and the quota
// statuses of a quota store that is down.
func contractFailures(t *testing.T, c *contract, backend []option) {
	const closedPort = "127.0.0.1:1"
	deadRedis := redis.NewClient(&redis.Options{Addr: closedPort, MaxRetries: -1})
	t.Cleanup(func() { deadRedis.Close() })
	deadDB := deadPostgres(t)
	ready := []Check{{Name: "redis", Ping: func(ctx context.Context) error { return deadRedis.Ping(ctx).Err() }}}

	// The quota store down: fail-closed refuses (quota-unavailable), and
	// fail-open serves (unmetered-pending).
	closed := newEnv(t, append(backend, withRedis("redis://"+closedPort), with(func(c *Config) { c.FailClosed, c.Ready = true, ready }))...)
	open := newEnv(t, append(backend, withRedis("redis://"+closedPort))...)
	for _, path := range meteredPaths {
		c.both(t, closed, get(path, 503).key("std"))
		if path != "/v1/quota" {
			c.check(t, open, get(path, 200).key("std"))
		}
	}
	c.both(t, closed, get("/readyz", 503))
	c.both(t, closed, exchange{admin: true, method: "GET", path: "/readyz", status: 503})
	c.both(t, closed, adminCall("GET", "/admin/keys/1/usage", "", 503))
	c.check(t, closed, adminCall("DELETE", "/admin/keys/1/usage", "", 503))

	// The database down: database-unavailable, the charge refunded.
	noDB := newEnv(t, append(backend, with(func(c *Config) {
		c.Geofence, c.Tiles = geofence.NewPostGIS(deadDB, time.Second), tiles.NewPostGIS(deadDB, time.Second)
	}))...)
	for _, path := range searchPaths {
		c.both(t, noDB, get(path, 503).key("std"))
	}
	c.both(t, noDB, get("/v1/tiles/places/3/1/3.mvt", 503).key("std"))
	c.both(t, noDB, get("/v1/tiles/places/3/1/3.pbf", 503).key("std"))

	// The key store on a schema without tables: a key the index lacks
	// cannot be checked (keys-unavailable).
	keysDown := newEnv(t, append(backend, func(t *testing.T, c *Config) {
		c.Keys = keys.NewIndex(keys.NewPostgres(emptySchema(t)), time.Second)
	})...)
	for _, path := range meteredPaths {
		c.both(t, keysDown, get(path, 503).key("std"))
	}

	// A database without the dataset's tables fails the query: a 500,
	// refunded; one that cannot answer in time, a 504.
	pool, _ := spatialtest.Loaded(t)
	broken := newEnv(t, append(backend, with(func(c *Config) {
		c.Geofence = brokenPostGIS(t)
		c.Tiles = tiles.NewPostGIS(emptySchema(t), time.Second)
	}))...)
	slow := newEnv(t, append(backend, with(func(c *Config) {
		c.Geofence = geofence.NewPostGIS(pool, time.Nanosecond)
		c.Tiles = tiles.NewPostGIS(pool, time.Nanosecond)
	}))...)
	for _, path := range slices.Concat(searchPaths, []string{"/v1/tiles/countries/0/0/0.mvt", "/v1/tiles/countries/0/0/0.pbf"}) {
		c.both(t, broken, get(path, 500).key("pro"))
	}
	// A search can beat the shortest statement timeout (a millisecond); a
	// world tile of countries cannot.
	for _, path := range []string{"/v1/tiles/countries/0/0/0.mvt", "/v1/tiles/countries/0/0/0.pbf"} {
		c.both(t, slow, get(path, 504).key("pro"))
	}
	// A search waits on tables another transaction holds locked, past its
	// statement timeout: a 504.
	ctx := context.Background()
	lockedDB := spatialtest.Migrated(t)
	lock, err := lockedDB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(ctx) })
	if _, err := lock.Exec(ctx, "LOCK TABLE places, fences IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	locked := newEnv(t, append(backend, with(func(c *Config) { c.Geofence = geofence.NewPostGIS(lockedDB, 100*time.Millisecond) }))...)
	for _, path := range searchPaths {
		c.both(t, locked, get(path, 504).key("pro"))
	}
}
