// Package web serves tileapi's demo page: a map of the service's own vector
// tiles, radius and containment queries on click, and a quota meter that
// reads nothing but the quota headers of the page's own requests.
//
// The page is built from src/ (OpenLayers, bundled with esbuild) into dist/,
// which is committed and embedded, so building the binary needs no npm. To
// rebuild it:
//
//	npm --prefix web/src ci && npm --prefix web/src run build
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"time"
)

//go:embed index.html
var indexHTML string

//go:embed dist/assets
var dist embed.FS

// asset is one file served: its name (whose extension gives its type), its
// content and its entity tag.
type asset struct {
	name string
	body []byte
	etag string
}

func newAsset(name string, body []byte) asset {
	s := sha256.Sum256(body)
	return asset{name: name, body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(s[:12]) + `"`}
}

// Handler serves the page at GET / with demoKey prefilled in its key field,
// and its files under /assets/; notFound answers a path under /assets/ that
// is none of them, so the service's 404s all look alike. It answers nothing
// else: mount it on those two paths only. It never panics on a request; it
// panics at start only if the embedded page is broken, which its test rules
// out.
func Handler(demoKey string, notFound http.Handler) http.Handler {
	assets := make(map[string]asset)
	sum := sha256.New()
	err := fs.WalkDir(dist, "dist/assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		sum.Write(b)
		assets["/assets/"+path.Base(p)] = newAsset(path.Base(p), b)
		return nil
	})
	if err != nil {
		panic("web: embedded assets: " + err.Error())
	}
	var index bytes.Buffer
	tmpl := template.Must(template.New("index").Parse(indexHTML))
	err = tmpl.Execute(&index, struct{ DemoKey, Version string }{
		DemoKey: demoKey,
		Version: base64.RawURLEncoding.EncodeToString(sum.Sum(nil)[:8]),
	})
	if err != nil {
		panic("web: index template: " + err.Error())
	}
	page := newAsset("index.html", index.Bytes())

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a, ok := page, r.URL.Path == "/"
		if !ok {
			a, ok = assets[r.URL.Path]
		}
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		// The page loads nothing from anywhere else.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}
