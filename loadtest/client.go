package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Result is the outcome of one request.
type Result struct {
	Key    int    `json:"key"` // index into the run's keys
	Target int    `json:"target"`
	Route  string `json:"route"`
	Status int    `json:"status"` // 0 when the request failed
	Cost   int64  `json:"cost"`   // X-RateLimit-Cost
	// Settled is what the request cost once settled (X-Quota-Settled-Cost,
	// an empty tile's one unit); 0 when it was not.
	Settled   int64         `json:"settled,omitempty"`
	Remaining int64         `json:"remaining"`
	Limit     string        `json:"limit,omitempty"` // the limit a 429 names
	Code      string        `json:"code,omitempty"`  // the problem code of an error
	Quota     string        `json:"quota,omitempty"` // X-Quota-Status: charged, unmetered, ...
	Cache     string        `json:"cache,omitempty"` // X-Tile-Cache
	Start     int64         `json:"start_us"`        // µs since the Unix epoch
	Latency   time.Duration `json:"latency_ns"`
	Bytes     int           `json:"bytes"` // of the body, uncompressed
	Err       string        `json:"err,omitempty"`
}

// held is what the quota holds of an answered request: its settled cost,
// or the price it was charged.
func (r Result) held() int64 {
	if r.Settled > 0 {
		return r.Settled
	}
	return r.Cost
}

// codeUnavailable is the problem code of a 503 from a server that fails
// closed when its quota store does not answer in time.
const codeUnavailable = "quota-unavailable"

// request is one request of a mix: a label for the tables and its path.
type request struct {
	route, path string
}

// places where the mixes search and draw tiles: dense, so the work is real.
var cities = [][2]float64{{2.3522, 48.8566}, {-0.1276, 51.5072}, {-73.9857, 40.7484}, {139.6917, 35.6895}}

// exactnessMix draws requests whose prices under the compiled-in cost model
// span 1 to 16 units: searches of 2, 4 and 6 km (1, 4 and 9 units) and
// tiles of places at z8-10 and countries at z2-3 (1 to 16 units rendered, a
// quarter of that from the cache, which the repeats reach).
func exactnessMix(r *rand.Rand) request {
	c := cities[r.IntN(len(cities))]
	switch n := r.IntN(10); {
	case n < 4:
		km := []int{2, 4, 6}[r.IntN(3)]
		return request{fmt.Sprintf("within %d km", km),
			fmt.Sprintf("/v1/geofence/within?lng=%g&lat=%g&radius=%d&limit=20", c[0], c[1], km*1000)}
	case n < 8:
		z := 8 + r.IntN(3)
		x, y := tileOf(c, z)
		return request{fmt.Sprintf("tile places z%d", z), fmt.Sprintf("/v1/tiles/places/%d/%d/%d.mvt", z, x+r.IntN(2), y+r.IntN(2))}
	default:
		z := 2 + r.IntN(2)
		x, y := tileOf(c, z)
		return request{fmt.Sprintf("tile countries z%d", z), fmt.Sprintf("/v1/tiles/countries/%d/%d/%d.mvt", z, x, y)}
	}
}

// tileOf returns the Web Mercator tile at zoom z holding the point lng/lat.
func tileOf(p [2]float64, z int) (x, y int) {
	n := math.Exp2(float64(z))
	lat := p[1] * math.Pi / 180
	x = int((p[0] + 180) / 360 * n)
	y = int((1 - math.Log(math.Tan(lat)+1/math.Cos(lat))/math.Pi) / 2 * n)
	return x, y
}

// newHTTPClient returns a client that keeps a connection per concurrent
// request open.
func newHTTPClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = conns, conns
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// do sends req to base with secret (none if empty) and reads the quota
// headers of the answer.
func do(ctx context.Context, hc *http.Client, base, secret string, req request) Result {
	res := Result{Route: req.route}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, base+req.path, nil)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	if secret != "" {
		hr.Header.Set("X-API-Key", secret)
	}
	start := time.Now()
	res.Start = start.UnixMicro()
	resp, err := hc.Do(hr)
	if err != nil {
		res.Latency, res.Err = time.Since(start), err.Error()
		return res
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	res.Latency = time.Since(start)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.Status, res.Bytes = resp.StatusCode, len(body)
	res.Cost, _ = strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
	res.Settled, _ = strconv.ParseInt(resp.Header.Get("X-Quota-Settled-Cost"), 10, 64)
	res.Remaining, _ = strconv.ParseInt(resp.Header.Get("X-RateLimit-Remaining"), 10, 64)
	res.Cache = resp.Header.Get("X-Tile-Cache")
	res.Quota = resp.Header.Get("X-Quota-Status")
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Limit string `json:"limit"`
			Code  string `json:"code"`
		}
		_ = json.Unmarshal(body, &p)
		res.Limit, res.Code = p.Limit, p.Code
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests && res.Code != codeUnavailable {
		res.Err = fmt.Sprintf("%s: %.200s", resp.Status, body)
	}
	return res
}

// getJSON GETs url with the header h and decodes a 200 answer into v.
func getJSON(ctx context.Context, hc *http.Client, url string, h http.Header, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header = h
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("loadtest: %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("loadtest: %s: %s: %.200s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("loadtest: %s: %w", url, err)
	}
	return nil
}
