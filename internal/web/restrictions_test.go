package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
)

// In headless Chromium, with CORS in keys mode: a page on the origin a
// publishable key is restricted to fetches a tile with it; a page on
// another origin cannot (no CORS answer for an origin no key allows, so
// the fetch fails), and a page on an origin another key allows gets the
// 403 of this key's restriction.
func TestRestrictedKeyInBrowser(t *testing.T) {
	var api *httptest.Server
	page := func(key string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, restrictedPage, api.URL, key)
		})
	}
	allowed := httptest.NewServer(page("web-key"))
	t.Cleanup(allowed.Close)
	other := httptest.NewServer(page("web-key"))
	t.Cleanup(other.Close)
	otherKeys := httptest.NewServer(page("web-key"))
	t.Cleanup(otherKeys.Close)

	api = httptest.NewServer(newService(t, func(c *httpapi.Config) {
		c.AllowedOrigins = []string{httpapi.CORSKeys}
		store := c.KeyAdmin.(*keys.Memory)
		ctx := context.Background()
		for secret, origin := range map[string]string{"web-key": allowed.URL, "other-key": otherKeys.URL} {
			k, err := store.Add(ctx, secret, "free", secret)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.SetRestrictions(ctx, k.ID, fmt.Appendf(nil, `{"origins": [%q]}`, origin)); err != nil {
				t.Fatal(err)
			}
		}
	}))
	t.Cleanup(api.Close)

	for _, tc := range []struct {
		name   string
		site   *httptest.Server
		status int // 0: the fetch fails
	}{
		{"the key's origin", allowed, http.StatusOK},
		{"an origin no key allows", other, 0},
		{"another key's origin", otherKeys, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := newBrowser(t, chromiumPath(t))
			if err := chromedp.Do(ctx, chromedp.Navigate(tc.site.URL)); err != nil {
				t.Fatal(err)
			}
			got := poll[restrictedResult](t, ctx, `window.result`, 30*time.Second)
			switch {
			case tc.status == 0 && got.Error == "":
				t.Errorf("the fetch from %s succeeded: %+v", tc.site.URL, got)
			case tc.status != 0 && got.Status != tc.status:
				t.Errorf("fetch from %s: %+v, want status %d", tc.site.URL, got, tc.status)
			case tc.status == http.StatusOK && got.Bytes == 0:
				t.Errorf("an empty tile: %+v", got)
			case tc.status == http.StatusForbidden && got.Code != "origin-not-allowed":
				t.Errorf("the page reads %+v, want the problem origin-not-allowed", got)
			}
		})
	}
}

// restrictedPage fetches a tile from the API at %q with the key %q, and
// keeps the status, the size and, for a problem, its code.
const restrictedPage = `<!doctype html><title>customer site</title><script>
fetch(%q + '/v1/tiles/places/3/4/2.mvt', {headers: {'X-API-Key': %q}})
  .then(async r => { const b = await r.arrayBuffer(); let code = '';
    if (r.status !== 200) { code = JSON.parse(new TextDecoder().decode(b)).code; }
    window.result = {status: r.status, bytes: b.byteLength, code: code}; })
  .catch(e => { window.result = {error: String(e)}; });
</script>`

type restrictedResult struct {
	Status, Bytes int
	Code, Error   string
}
