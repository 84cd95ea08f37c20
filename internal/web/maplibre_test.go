package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/dataversion"
	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/tiles"
)

// maplibreDist is where npm installs MapLibre GL JS's browser build:
// npm --prefix internal/validators ci.
const maplibreDist = "../validators/node_modules/maplibre-gl/dist"

// TestMapLibre draws tileapi's three layers with MapLibre GL JS, each
// source from its TileJSON, on a key of the compiled-in free plan with its
// compiled-in prices, in a 1024x768 view: the first view of Central Europe
// and of the United States at zoom 3, 5 and 10, each on a fresh server (an
// empty tile cache, a quota untouched), must load every tile it asks for
// with no 429 and draw places and countries (and counties in the United
// States). A view's tiles and units are logged; the screenshots go to
// TILEAPI_SCREENSHOT_DIR.
func TestMapLibre(t *testing.T) {
	ctx, c := newMapLibre(t)
	d, err := dataset.Load()
	if err != nil {
		t.Fatal(err)
	}
	shots := screenshotDir(t)
	for _, v := range []struct {
		name     string
		lng, lat float64
		counties bool // the view holds counties
	}{
		{"central-europe", 10, 50, false},
		{"united-states", -98, 39, true},
	} {
		for _, zoom := range []int{3, 5, 10} {
			t.Run(fmt.Sprintf("%s/z%d", v.name, zoom), func(t *testing.T) {
				q := url.Values{"lng": {fmt.Sprint(v.lng)}, "lat": {fmt.Sprint(v.lat)}, "zoom": {strconv.Itoa(zoom)}, "key": {"map-free"},
					"layers": {"fill:countries,line:counties,circle:places"}}
				st := firstView(t, ctx, c, mapLibreService(t, d, nil, nil), q, filepath.Join(shots, fmt.Sprintf("maplibre-%s-z%d.png", v.name, zoom)))
				t.Logf("first view of %s at zoom %d: %s", v.name, zoom, st)
				drawn := evaluate[map[string]int](t, ctx, `Object.fromEntries(['countries', 'counties', 'places'].map(l => [l, map.queryRenderedFeatures({layers: [l]}).length]))`)
				if drawn["countries"] == 0 || drawn["places"] == 0 || (v.counties && drawn["counties"] == 0) {
					t.Errorf("features drawn %v; want countries and places%s", drawn, map[bool]string{true: " and counties"}[v.counties])
				}
			})
		}
	}
}

// newMapLibre starts headless Chromium with WebGL in software, for pages
// of MapLibre GL JS (which it needs installed: npm --prefix
// internal/validators ci), and collects what its pages write to the
// console, logged if the test fails.
func newMapLibre(t *testing.T) (context.Context, *console) {
	t.Helper()
	chromium := chromiumPath(t)
	if _, err := os.Stat(filepath.Join(maplibreDist, "maplibre-gl.js")); err != nil {
		quotatest.Unavailable(t, "MapLibre GL JS", "npm --prefix internal/validators ci", err)
	}
	ctx := newBrowser(t, chromium, chromedp.Flag("enable-unsafe-swiftshader", true))
	c := collectConsole(ctx)
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range c.messages() {
				t.Logf("console: %s", m)
			}
		}
	})
	return ctx, c
}

// viewStats count the responses of the service to a first view.
type viewStats struct {
	tiles, empty int
	perLayer     map[string]int
	requests     int
	units        int64 // the final prices of the 200s
}

func (s viewStats) String() string {
	return fmt.Sprintf("%d tiles (%v), %d empty, %d requests in all, %d units", s.tiles, s.perLayer, s.empty, s.requests, s.units)
}

// firstView serves h on a fresh server and draws map.html?q at 1024x768
// in the browser of ctx, whose console is c: once the map has every tile
// of its first view, loaded or failed, and the service has answered every
// request the page made, it saves a screenshot to shot and counts the
// responses. It fails t on a response but 200, on an error of the map and
// on an error or exception in the console; if t fails, by then or later
// (a view that never loads), the page as it is then goes to
// failedShot(shot).
func firstView(t *testing.T, ctx context.Context, c *console, h http.Handler, q url.Values, shot string) viewStats {
	t.Helper()
	screenshotOnFailure(t, ctx, failedShot(shot))
	log := &tileLog{}
	srv := httptest.NewServer(log.wrap(h))
	t.Cleanup(srv.Close)
	seen := len(c.messages())
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1024, 768), chromedp.Navigate(srv.URL+"/map.html?"+q.Encode())); err != nil {
		t.Fatal(err)
	}
	// The first view is drawn when the map has every tile of it, loaded or
	// failed; the requests it made are then all in the server's log.
	poll[bool](t, ctx, `map.loaded() && map.areTilesLoaded()`, 60*time.Second)
	got := log.await(t, evaluate[int](t, ctx, `window.mapRequests`))
	saveScreenshot(t, ctx, shot)

	st := viewStats{perLayer: map[string]int{}, requests: len(got)}
	for _, r := range got {
		if r.status != http.StatusOK {
			t.Errorf("%s: status %d, want 200", r.path, r.status)
			continue
		}
		st.units += r.cost
		if layer, ok := strings.CutPrefix(r.path, "/v1/tiles/"); ok && strings.HasSuffix(r.path, ".mvt") {
			st.tiles++
			st.perLayer[layer[:strings.IndexByte(layer, '/')]]++
			if r.size == 0 {
				st.empty++
			}
		}
	}
	if errs := evaluate[[]string](t, ctx, `window.mapErrors`); len(errs) > 0 {
		t.Errorf("the map's errors: %q", errs)
	}
	for _, m := range c.messages()[seen:] {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			t.Errorf("console: %s (%s:%d)", m, m.URL, m.Line)
		}
	}
	return st
}

// mapLibreService serves map.html and MapLibre GL JS under /maplibre/,
// beside the service with memory backends, the compiled-in plans and the
// key map-free on the free plan, whose in-flight limit it enforces. It
// serves layers and sets (as sources.Open publishes them), or the bundled
// layers and sets of d where they are nil.
func mapLibreService(t testing.TB, d *dataset.Dataset, layers *tiles.Catalog, sets *geofence.Sets) http.Handler {
	t.Helper()
	store := keys.NewMemory()
	if _, err := store.Add(context.Background(), "map-free", "free", "map-free"); err != nil {
		t.Fatal(err)
	}
	s, err := httpapi.NewServer(httpapi.Config{
		Quota:       quota.NewMemory(nil),
		InFlight:    inflight.NewMemory(),
		Geofence:    geofence.NewMemory(d),
		Tiles:       tiles.NewMemory(d),
		Layers:      layers,
		Sets:        sets,
		TileCache:   tilecache.NewMemory(64<<20, time.Hour),
		Keys:        keys.NewIndex(store, time.Minute),
		KeyAdmin:    store,
		Plans:       plans.Defaults(),
		DataVersion: dataversion.Fixed("test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", s)
	mux.Handle("GET /maplibre/", http.StripPrefix("/maplibre/", http.FileServer(http.Dir(maplibreDist))))
	mux.HandleFunc("GET /map.html", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join("testdata", "maplibre", "index.html"))
	})
	return mux
}

// tileResponse is one response of the service under /v1/: its status,
// the units it cost in the end and its size.
type tileResponse struct {
	path   string
	status int
	cost   int64
	size   int
}

// tileLog records the responses of the service under /v1/.
type tileLog struct {
	mu    sync.Mutex
	resps []tileResponse
	added chan struct{} // closed and replaced on each response
}

func (l *tileLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			h.ServeHTTP(w, r)
			return
		}
		r.Header.Del("Accept-Encoding") // so that a tile's size is its own
		cw := &countingWriter{statusWriter: statusWriter{ResponseWriter: w, status: http.StatusOK}}
		h.ServeHTTP(cw, r)
		// The final price: settled, else charged up front.
		hdr := w.Header()
		price := hdr.Get("X-Quota-Settled-Cost")
		if price == "" {
			price = hdr.Get("X-RateLimit-Cost")
		}
		cost, _ := strconv.ParseInt(price, 10, 64)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.resps = append(l.resps, tileResponse{path: r.URL.Path, status: cw.status, cost: cost, size: cw.size})
		if l.added != nil {
			close(l.added)
			l.added = nil
		}
	})
}

// await returns the responses once there are n of them.
func (l *tileLog) await(t testing.TB, n int) []tileResponse {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		if len(l.resps) >= n {
			defer l.mu.Unlock()
			return append([]tileResponse(nil), l.resps...)
		}
		if l.added == nil {
			l.added = make(chan struct{})
		}
		added := l.added
		l.mu.Unlock()
		select {
		case <-added:
		case <-timeout:
			t.Fatalf("the page had %d responses of the service; its log has fewer", n)
		}
	}
}

type countingWriter struct {
	statusWriter
	size int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.statusWriter.Write(b)
	w.size += n
	return n, err
}
