package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// crossOriginPage fetches a tile from the API at %q (another origin) with a
// key, and keeps what a map client reads of the answer.
const crossOriginPage = `<!doctype html><title>customer site</title><script>
fetch(%q + '/v1/tiles/places/3/4/2.mvt', {headers: {'X-API-Key': 'demo-free'}})
  .then(r => r.arrayBuffer().then(b => { window.result = {
    status: r.status, bytes: b.byteLength, ratelimit: r.headers.get('RateLimit') || '',
    policy: r.headers.get('RateLimit-Policy') || '', cache: r.headers.get('X-Tile-Cache') || '',
    etag: r.headers.get('ETag') || '' }; }))
  .catch(e => { window.result = {error: String(e)}; });
</script>`

type crossOriginResult struct {
	Status, Bytes                  int
	RateLimit, Policy, Cache, ETag string
	Error                          string
}

// A page on a customer's own origin fetches tiles with a key in headless
// Chromium, through a CORS preflight, and reads the quota headers.
func TestCrossOriginPage(t *testing.T) {
	api := httptest.NewServer(newService(t))
	t.Cleanup(api.Close)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, crossOriginPage, api.URL)
	}))
	t.Cleanup(site.Close)

	ctx := newBrowser(t, chromiumPath(t))
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL)); err != nil {
		t.Fatal(err)
	}
	got := poll[crossOriginResult](t, ctx, `window.result`, 30*time.Second)
	if got.Error != "" || got.Status != 200 || got.Bytes == 0 {
		t.Fatalf("cross-origin fetch: %+v", got)
	}
	if got.RateLimit == "" || got.Policy == "" || got.Cache != "MISS" || got.ETag == "" {
		t.Errorf("the page cannot read the quota headers: %+v", got)
	}
}
