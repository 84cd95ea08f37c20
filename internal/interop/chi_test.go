package interop

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// The gate is plain middleware: under a chi router, as under the standard
// mux and no router (quotahttp's TestRouters), the same handler is limited
// over real HTTP.
func TestGateUnderChi(t *testing.T) {
	plan := mustPlan(t, quota.PerMinute(2))
	r := chi.NewRouter()
	r.Use(quotahttp.Limit(quota.NewMemory(nil), plan))
	r.Get("/search", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := httptest.NewServer(r)
	defer srv.Close()
	var codes []int
	for range 3 {
		resp, err := http.Get(srv.URL + "/search")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Errorf("statuses %v, want [200 200 429]", codes)
	}
}

func mustPlan(t *testing.T, limits ...quota.Limit) quota.Plan {
	t.Helper()
	p, err := quota.NewPlan("test", limits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
