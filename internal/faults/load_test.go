package faults

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clients is how many requests are in flight at once, spread over the
// rig's servers and keys, unless the fault says otherwise: client i sends
// its requests to server i mod servers, charged to key (i / servers) mod
// keys, so that every key is charged on every server.
const clients = 8

// result is one response as a client saw it.
type result struct {
	id         string // X-Request-Id, which the server logs
	path       string
	key        int // index into the rig's keys; -1 for none of them
	start, end time.Time
	status     int
	code       string // the problem's code
	quota      string // X-Quota-Status
	cost       int64  // what the request cost in the end: X-Quota-Settled-Cost, or else X-RateLimit-Cost
	tileHit    bool   // X-Tile-Cache: HIT: charged the miss price and lowered in the background, unless held in process
	retryAfter string
	rateLimit  string // RateLimit: what is left of each limit
	err        error  // the request got no response
}

func (r result) took() time.Duration { return r.end.Sub(r.start) }

// late reports a response that is the policy's answer to a quota call that
// ran out of time: it took at least half the quota budget (the quota script
// refuses a charge that reaches Redis after half of it), whatever Redis did.
func (r result) late(closed bool) bool {
	o := r.outcome()
	return o != charged && r.took() >= quotaTimeout/2 && slices.Contains(redisFailing(closed), o)
}

// slowQuery reports a response that is the answer to a database query
// that ran out of time: a 504 query-timeout, its charge given back or being
// given back, after at least the query timeout. On a loaded machine a query
// can outlast the timeout whatever the fault, and that answer is right at
// any time; that nothing stays charged for it is checked apart.
func (r result) slowQuery() bool {
	o := r.outcome()
	return strings.HasPrefix(o, "504 query-timeout ") && r.took() >= queryTimeout
}

// outcome names a response as the failure policy does: its status, its
// problem code if any, and its X-Quota-Status if any but refused, which a
// refusal always says: "200 charged", "503 quota-unavailable", "504
// query-timeout refunded". A 503 without Retry-After, a refund without
// RateLimit headers, or a quota's refusal without X-Quota-Status: refused
// says so, and matches no policy.
func (r result) outcome() string {
	switch {
	case r.err != nil:
		return "no response"
	case r.status == http.StatusOK:
		if r.quota == "" {
			return "200 without X-Quota-Status"
		}
		return "200 " + r.quota
	}
	s := fmt.Sprintf("%d %s", r.status, r.code)
	switch {
	case r.quota == "refused":
	case r.quota != "":
		s += " " + r.quota
	case slices.Contains([]string{"quota-exceeded", "quota-exhausted", "concurrency-exceeded", "quota-unavailable"}, r.code):
		s += " without X-Quota-Status: refused"
	}
	if r.quota == "refunded" && r.rateLimit == "" {
		s += " without RateLimit"
	}
	if r.status == http.StatusServiceUnavailable && r.retryAfter == "" {
		s += " without Retry-After"
	}
	return s
}

const charged = "200 charged"

// maxPrice is the most a request of the load costs (a places tile of zoom
// 8 on the default plans).
const maxPrice = 16

// The load: searches and tiles around Paris, priced 1 to 16 units, few
// enough tiles that the tile cache is hit as well as missed.
var (
	searches = []string{
		"/v1/geofence/within?lng=2.3522&lat=48.8566&radius=2000&limit=20",
		"/v1/geofence/contains?lng=2.3522&lat=48.8566",
	}
	tiles = [][4]int{ // layer 0 places, 1 countries; z; x; y of the tile holding Paris
		{0, 8, 129, 88}, {0, 9, 259, 176}, {0, 10, 518, 352}, {1, 2, 2, 1}, {1, 3, 4, 2},
	}
)

func randomPath(rnd *rand.Rand) string {
	if rnd.IntN(2) == 0 {
		return searches[rnd.IntN(len(searches))]
	}
	t := tiles[rnd.IntN(len(tiles))]
	layer := [...]string{"places", "countries"}[t[0]]
	return fmt.Sprintf("/v1/tiles/%s/%d/%d/%d.mvt", layer, t[1], t[2]+rnd.IntN(2), t[3]+rnd.IntN(2))
}

// newHTTPClient keeps a connection per client of n. Its timeout is
// several times any budget, so that a stalled request shows as a long one,
// but does not hold up the suite.
func newHTTPClient(n int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = n
	return &http.Client{Transport: t, Timeout: 5 * time.Second}
}

// drive starts the clients; the returned func stops them, lets the
// requests in flight finish, and returns every result.
func drive(t *testing.T, hc *http.Client, r *rig) (stop func() []result) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make([][]result, r.clients)
	var wg sync.WaitGroup
	for i := range r.clients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(i), 10))
			key := i / len(r.urls) % len(r.keys)
			for n := 0; ctx.Err() == nil; n++ {
				res := get(hc, r.server(i), randomPath(rnd), r.keys[key].secret, fmt.Sprintf("c%d-%d", i, n))
				res.key = key
				if res.outcome() == charged {
					r.charged[key].Add(res.cost)
				}
				out[i] = append(out[i], res)
			}
		})
	}
	return func() []result {
		cancel()
		wg.Wait()
		var all []result
		for _, rs := range out {
			all = append(all, rs...)
		}
		return all
	}
}

// get sends one request with the API key secret and the request id id,
// and reads what the policy judges of the response.
func get(hc *http.Client, base, path, secret, id string) result {
	res := result{id: id, path: path, key: -1, start: time.Now()}
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		panic(err) // the suite's own paths
	}
	req.Header.Set("X-API-Key", secret)
	req.Header.Set("X-Request-Id", id)
	resp, err := hc.Do(req)
	if err != nil {
		res.end, res.err = time.Now(), err
		return res
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	res.end, res.err = time.Now(), err
	res.status = resp.StatusCode
	res.quota = resp.Header.Get("X-Quota-Status")
	res.cost, _ = strconv.ParseInt(cmp.Or(resp.Header.Get("X-Quota-Settled-Cost"), resp.Header.Get("X-RateLimit-Cost")), 10, 64)
	res.tileHit = resp.Header.Get("X-Tile-Cache") == "HIT"
	res.retryAfter = resp.Header.Get("Retry-After")
	res.rateLimit = resp.Header.Get("RateLimit")
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(body, &p)
		res.code = p.Code
	}
	return res
}

// readiness asks the /readyz of admin, a server's admin listener (the
// public one says only ready or not), and names the answer: its status, and
// whether it reports Redis failing ("503 redis failing"); and how long it
// took.
func readiness(hc *http.Client, admin string) (string, time.Duration) {
	start := time.Now()
	resp, err := hc.Get(admin + "/readyz")
	if err != nil {
		return "no response", time.Since(start)
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	took := time.Since(start)
	if err != nil {
		return fmt.Sprintf("%d unreadable", resp.StatusCode), took
	}
	redis := "ok"
	if body.Checks["redis"] != "ok" {
		redis = "failing"
	}
	return fmt.Sprintf("%d redis %s", resp.StatusCode, redis), took
}
