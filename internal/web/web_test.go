package web_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"github.com/tileapi/tileapi/internal/web"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/tiles"
)

// Environment variables read by the browser test.
const (
	envChromium      = "TILEAPI_CHROMIUM"       // the browser; default: chromium on PATH
	envScreenshotDir = "TILEAPI_SCREENSHOT_DIR" // where the screenshots go; default: a temporary directory
)

// tinyPlan admits twelve units in any four seconds: less than the tiles of
// one screen, so the page meets a 429 and must wait and retry.
const tinyPlan = `{"plans": [{"name": "tiny", "max_radius_m": 5000, "limits": [{"name": "burst", "max": 12, "window": "4s"}]}]}`

func TestHandler(t *testing.T) {
	h := web.Handler(`demo-"<key>`, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
		contains     string
	}{
		{"GET", "/", http.StatusOK, "text/html; charset=utf-8", `value="demo-&#34;&lt;key&gt;"`},
		{"GET", "/assets/app.js", http.StatusOK, "text/javascript; charset=utf-8", ""},
		{"GET", "/assets/app.css", http.StatusOK, "text/css; charset=utf-8", ""},
		{"GET", "/assets/licenses.txt", http.StatusOK, "text/plain; charset=utf-8", "OpenLayers Contributors"},
		{"GET", "/assets/nope.js", http.StatusTeapot, "", ""}, // its notFound
		{"POST", "/", http.StatusMethodNotAllowed, "", ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			if tc.status != http.StatusOK {
				return
			}
			if got := w.Header().Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if !strings.Contains(w.Body.String(), tc.contains) {
				t.Errorf("body does not contain %q", tc.contains)
			}
			etag := w.Header().Get("ETag")
			r := httptest.NewRequest(tc.method, tc.path, nil)
			r.Header.Set("If-None-Match", etag)
			w = httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusNotModified {
				t.Errorf("with If-None-Match %s: status %d, want 304", etag, w.Code)
			}
		})
	}
}

// TestPage loads the page in headless Chromium against the service in this
// process and checks what a person would: the map draws our tiles, fetched
// with the key; a click runs a radius query and moves the meter; a plan
// that runs out shows the Retry-After countdown, and the page retries when
// it ends.
func TestPage(t *testing.T) {
	chromium := chromiumPath(t)
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(newService(t)))
	t.Cleanup(srv.Close)
	ctx := newBrowser(t, chromium)
	console := collectConsole(ctx)
	shots := screenshotDir(t)
	screenshotOnFailure(t, ctx, filepath.Join(shots, "demo-page-failed.png"))

	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}

	// The map draws tiles of the three layers, each fetched with the key.
	stats := poll[canvasStats](t, ctx, `(s => s.inked > 0.1 * s.sampled && s.colors >= 4 && s)(`+canvasStatsJS+`)`, 30*time.Second)
	t.Logf("map canvas: %d of %d sampled pixels drawn, in %d colours", stats.Inked, stats.Sampled, stats.Colors)
	rec.settle(t)
	for _, layer := range []string{"countries", "counties", "places"} {
		if n := len(rec.find(func(r request) bool { return strings.HasPrefix(r.path, "/v1/tiles/"+layer+"/") })); n == 0 {
			t.Errorf("no tile of %s was requested", layer)
		}
	}
	for _, r := range rec.find(func(r request) bool { return strings.HasPrefix(r.path, "/v1/") }) {
		if r.key != "demo-free" || r.status != http.StatusOK {
			t.Errorf("%s: key %q, status %d; want the demo key and 200", r.path, r.key, r.status)
		}
	}

	// A click runs a radius query and a containment query; the meter moves.
	before := evaluate[map[string]int](t, ctx, meterJS)
	evaluate[string](t, ctx, `(() => { const r = document.getElementById('radius'); r.value = '10000'; r.dispatchEvent(new Event('input')); return r.value; })()`)
	center := evaluate[[]float64](t, ctx, `(() => { const r = document.getElementById('map').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	if err := chromedp.Do(ctx, chromedp.MouseClickXY(center[0], center[1])); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, `!document.getElementById('results').hidden && document.getElementById('fences').textContent !== '' && document.getElementById('found-count').textContent !== ''`, 10*time.Second)
	rec.settle(t)
	after := evaluate[map[string]int](t, ctx, meterJS)
	t.Logf("meter before the click %v, after %v", before, after)
	// within 10 km costs ceil((10000/2000)^2) = 25 units and contains 1.
	if after["minute"] > before["minute"]-26 {
		t.Errorf("minute remaining went from %d to %d; want at least 26 units less", before["minute"], after["minute"])
	}
	within := rec.find(func(r request) bool { return r.path == "/v1/geofence/within" })
	if len(within) != 1 || within[0].key != "demo-free" || within[0].status != http.StatusOK {
		t.Errorf("within requests %+v; want one, with the key, answered 200", within)
	}
	row := evaluate[[]string](t, ctx, `[...document.querySelectorAll('#log tr')].map(tr => [...tr.cells].map(td => td.textContent)).find(c => c[0].startsWith('within')) || []`)
	if len(row) != 3 || row[0] != "within 10 km" || row[1] != "200" || row[2] != "25" {
		t.Errorf("log row of the radius query %q; want within 10 km, 200, 25", row)
	}
	found := evaluate[string](t, ctx, `document.getElementById('found-count').textContent`)
	fences := evaluate[string](t, ctx, `document.getElementById('fences').textContent`)
	t.Logf("radius query: %s places; inside %s", found, fences)
	if n, err := strconv.Atoi(found); err != nil || n == 0 {
		t.Errorf("found %q places; want some around San Leandro", found)
	}
	if !strings.Contains(fences, "Alameda (county)") || !strings.Contains(fences, "(country)") {
		t.Errorf("fences %q; want Alameda county and its country", fences)
	}
	saveScreenshot(t, ctx, filepath.Join(shots, "demo-page.png"))

	// A radius beyond the plan's is refused with what would fit.
	evaluate[string](t, ctx, `(() => { const r = document.getElementById('radius'); r.value = '30000'; r.dispatchEvent(new Event('input')); return r.value; })()`)
	if err := chromedp.Do(ctx, chromedp.MouseClickXY(center[0], center[1])); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, `document.getElementById('found-count').textContent.startsWith('422')`, 10*time.Second)
	row = evaluate[[]string](t, ctx, `[...document.querySelectorAll('#log tr')].map(tr => [...tr.cells].map(td => td.textContent)).find(c => c[0].startsWith('within 30')) || []`)
	if len(row) != 3 || row[1] != "422" || row[2] != "radius-exceeds-plan (max 20000 m)" {
		t.Errorf("log row of a 30 km query %q; want 422 and the plan's largest radius", row)
	}

	// A plan smaller than a screen of tiles: 429, a countdown, a retry.
	evaluate[string](t, ctx, `(() => { const k = document.getElementById('key'); k.value = 'demo-tiny'; k.dispatchEvent(new Event('change')); return k.value; })()`)
	poll[bool](t, ctx, `!document.getElementById('retry').hidden`, 10*time.Second)
	first := countdown(t, ctx)
	saveScreenshot(t, ctx, filepath.Join(shots, "demo-page-429.png"))
	time.Sleep(time.Second)
	if second := countdown(t, ctx); !(first > 0 && first <= 4 && second < first) {
		t.Errorf("countdown %.1f s, a second later %.1f s; want it to start at most at the 4 s window and fall", first, second)
	}
	denied := rec.find(func(r request) bool { return r.key == "demo-tiny" && r.status == http.StatusTooManyRequests })
	if len(denied) == 0 || !strings.HasPrefix(denied[0].path, "/v1/tiles/") {
		t.Fatalf("no tile request of the tiny plan was denied: %+v", denied)
	}
	// When the countdown ends, the denied tiles are asked again, until the
	// map has every tile it wants.
	poll[bool](t, ctx, `document.getElementById('retry').hidden`, 10*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing := rec.unanswered("demo-tiny")
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tiles never loaded after their 429: %v", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Zooming out costs more: back on the free plan, two zooms out ask for
	// places tiles of zoom 8 at 16 units each.
	evaluate[string](t, ctx, `(() => { const k = document.getElementById('key'); k.value = 'demo-free'; k.dispatchEvent(new Event('change')); return k.value; })()`)
	rec.settle(t)
	evaluate[bool](t, ctx, `(document.querySelector('.ol-zoom-out').click(), true)`)
	time.Sleep(500 * time.Millisecond) // the zoom animates for 250 ms
	evaluate[bool](t, ctx, `(document.querySelector('.ol-zoom-out').click(), true)`)
	poll[bool](t, ctx, `[...document.querySelectorAll('#log tr')].some(tr => tr.cells[0].textContent.startsWith('tile places 8/') && tr.cells[2].textContent === '16')`, 10*time.Second)
	rec.settle(t)
	// Beside the meter, the free key's units per hour, by layer, read from
	// /v1/usage when the key came back: the tiles of three layers and the
	// radius query's places.
	legend := poll[[]string](t, ctx, `(l => l.length >= 4 && l)([...document.querySelectorAll('#usage-legend .swatch')].map(s => s.textContent))`, 10*time.Second)
	bars := evaluate[int](t, ctx, `document.querySelectorAll('#usage-chart rect').length`)
	total := evaluate[string](t, ctx, `document.getElementById('usage-total').textContent`)
	t.Logf("usage chart: %d bars, %v; %s", bars, legend, total)
	for _, layer := range []string{"countries", "counties", "places"} {
		if !slices.Contains(legend, layer) {
			t.Errorf("usage chart legend %v lacks %s", legend, layer)
		}
	}
	if bars < 4 || !strings.HasSuffix(total, "requests") {
		t.Errorf("usage chart: %d bars, total %q; want a bar per layer and the totals", bars, total)
	}
	saveScreenshot(t, ctx, filepath.Join(shots, "demo-page-zoomed-out.png"))

	msgs := console.messages()
	for _, m := range msgs {
		t.Logf("console: %s", m)
		// The browser logs the 429s and the 422 that the test provokes.
		expected := m.Source == "network" && (strings.Contains(m.Text, "status of 429") || strings.Contains(m.Text, "status of 422"))
		if (m.Type == chromedp.ConsoleError || m.IsException()) && !expected {
			t.Errorf("console: %s (%s:%d)", m, m.URL, m.Line)
		}
	}
}

// A test that fails leaves a screenshot of the page as it was when it gave
// up; one that passes leaves none.
func TestScreenshotOnFailure(t *testing.T) {
	chromium := chromiumPath(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>a view</title><h1 style="color: red">this view never loaded</h1>`)
	}))
	t.Cleanup(page.Close)
	ctx := newBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, failed := range []bool{true, false} {
		path := filepath.Join(dir, fmt.Sprintf("view-%v-failed.png", failed))
		run := &endedTest{TB: t, failed: failed}
		screenshotOnFailure(run, ctx, path)
		run.end()
		png, err := os.ReadFile(path)
		switch {
		case failed && (err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n"))):
			t.Errorf("a failed test: %d bytes at %s, %v; want a PNG", len(png), path, err)
		case !failed && err == nil:
			t.Errorf("a test that passed left a screenshot at %s", path)
		}
	}
}

// endedTest is t as a test that has failed or not, whose cleanups run
// when end is called.
type endedTest struct {
	testing.TB
	failed   bool
	cleanups []func()
}

func (e *endedTest) Failed() bool     { return e.failed }
func (e *endedTest) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }
func (e *endedTest) end() {
	for _, f := range slices.Backward(e.cleanups) {
		f()
	}
}

// newService returns the service with memory backends, the default plans
// and tinyPlan, and the keys demo-free (plan free) and demo-tiny, with
// what opts change in its configuration; its key index is read at start,
// as serve does.
func newService(t testing.TB, opts ...func(*httpapi.Config)) http.Handler {
	t.Helper()
	ctx := context.Background()
	d, err := dataset.Load()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(tinyPlan), 0o600); err != nil {
		t.Fatal(err)
	}
	ps, err := plans.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	store := keys.NewMemory()
	for secret, plan := range map[string]string{"demo-free": "free", "demo-tiny": "tiny"} {
		if _, err := store.Add(ctx, secret, plan, secret); err != nil {
			t.Fatal(err)
		}
	}
	index := keys.NewIndex(store, time.Minute)
	cfg := httpapi.Config{
		Quota:       quota.NewMemory(nil),
		Geofence:    geofence.NewMemory(d),
		Tiles:       tiles.NewMemory(d),
		TileCache:   tilecache.NewMemory(64<<20, time.Hour),
		Keys:        index,
		KeyAdmin:    store,
		Plans:       ps,
		DataVersion: dataversion.Fixed("test"),
		DemoKey:     "demo-free",
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := httpapi.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// chromiumPath finds the browser; a missing one fails the test, or skips
// it under TEST_SKIP_MISSING, as a missing server does.
func chromiumPath(t testing.TB) string {
	t.Helper()
	p := os.Getenv(envChromium)
	if p == "" {
		p = "chromium"
	}
	found, err := exec.LookPath(p)
	if err == nil {
		return found
	}
	quotatest.Unavailable(t, "Chromium", "apt-get install chromium, or set "+envChromium, err)
	return ""
}

// newBrowser starts headless Chromium with a fresh profile, and extra
// flags, closed when the test ends.
func newBrowser(t testing.TB, path string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}, extra...)...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelTab)
	return ctx
}

// console holds what the page wrote to the console.
type console struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

func collectConsole(ctx context.Context) *console {
	c := &console{}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			c.mu.Lock()
			c.msgs = append(c.msgs, m)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *console) messages() []chromedp.ConsoleMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), c.msgs...)
}

// canvasStatsJS samples the pixels of the map's canvases: how many are
// drawn (not transparent) and in how many colours.
const canvasStatsJS = `(() => {
	let sampled = 0, inked = 0;
	const colors = new Set();
	for (const c of document.querySelectorAll('#map canvas')) {
		if (!c.width || !c.height) continue;
		const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
		for (let i = 0; i < d.length; i += 4 * 13) {
			sampled++;
			if (d[i + 3] > 0) { inked++; colors.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]); }
		}
	}
	return {sampled, inked, colors: colors.size};
})()`

type canvasStats struct {
	Sampled, Inked, Colors int
}

// meterJS reads the units left of each limit, as the meter shows them.
const meterJS = `Object.fromEntries([...document.querySelectorAll('#limits .limit')].map(e => [e.dataset.limit, Number(e.dataset.remaining)]))`

func countdown(t testing.TB, ctx context.Context) float64 {
	t.Helper()
	s := evaluate[string](t, ctx, `document.getElementById('retry-seconds').textContent`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("countdown %q: %v", s, err)
	}
	return f
}

func evaluate[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

func poll[T any](t testing.TB, ctx context.Context, js string, timeout time.Duration) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](js, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("waiting for %s: %v", js, err)
	}
	return v
}

func screenshotDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(envScreenshotDir); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func saveScreenshot(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	if err := writeScreenshot(ctx, path); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// screenshotOnFailure saves a screenshot of the page of ctx to path once t
// ends, if it failed: a view that never loaded, or drew the wrong thing,
// is in the screenshots as the browser showed it, the moment the test
// gave up. Call it after the browser is started, so that the browser is
// still open when t ends.
func screenshotOnFailure(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if err := writeScreenshot(ctx, path); err != nil {
			t.Logf("no screenshot of the failure: %v", err)
			return
		}
		t.Logf("screenshot of the failure: %s", path)
	})
}

// failedShot is the name of the screenshot of a failure of the view whose
// screenshot is shot: maplibre-x.png, maplibre-x-failed.png.
func failedShot(shot string) string { return strings.TrimSuffix(shot, ".png") + "-failed.png" }

// writeScreenshot writes a PNG of the page of ctx to path.
func writeScreenshot(ctx context.Context, path string) error {
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(path, png, 0o644)
}

// request is one request the service answered.
type request struct {
	path, key string
	status    int
}

// recorder records every request to the service, with its key and status.
type recorder struct {
	mu   sync.Mutex
	reqs []request
	last time.Time
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.reqs = append(rec.reqs, request{path: r.URL.Path, key: r.Header.Get("X-API-Key"), status: sw.status})
		rec.last = time.Now()
	})
}

func (rec *recorder) find(match func(request) bool) []request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var found []request
	for _, r := range rec.reqs {
		if match(r) {
			found = append(found, r)
		}
	}
	return found
}

// unanswered returns the tiles that key asked for and has not yet had.
func (rec *recorder) unanswered(key string) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	loaded := make(map[string]bool)
	for _, r := range rec.reqs {
		if r.key == key && strings.HasPrefix(r.path, "/v1/tiles/") {
			loaded[r.path] = loaded[r.path] || r.status == http.StatusOK
		}
	}
	var missing []string
	for p, ok := range loaded {
		if !ok {
			missing = append(missing, p)
		}
	}
	return missing
}

// settle waits until the service has had no request for half a second.
func (rec *recorder) settle(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		rec.mu.Lock()
		quiet := time.Since(rec.last) > 500*time.Millisecond
		rec.mu.Unlock()
		if quiet {
			return
		}
	}
	t.Fatal("the page never stopped sending requests")
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
