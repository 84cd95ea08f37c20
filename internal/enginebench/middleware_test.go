package enginebench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// BenchmarkMiddleware measures what the gate itself costs a request, with
// the in-memory store, against a bare handler and against go-chi/httprate's
// middleware keyed by the client address (what its deprecated LimitByIP
// does, spelled out) on the same handler, in the same run:
//
//	go test ./internal/enginebench -run '^$' -bench Middleware -benchmem -count 10 -cpu 1 | tee mw.txt
//	benchstat -col /impl mw.txt
//
// Requests come from 1,000 client addresses, under a limit they never
// reach, so every request is admitted and charged; both limiters write
// their headers (httprate its X-RateLimit-*, the gate every group).
// benchPerSecond is the limit of both, never reached by a thousand
// addresses.
func BenchmarkMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	plan, err := quota.NewPlan("bench", quota.PerSecond(benchPerSecond))
	if err != nil {
		b.Fatal(err)
	}
	// Two windows, as tileapi's plans have (a burst limit inside a longer
	// one): what a second limit adds. The longer is a second, so that the
	// logs stay the size the warm-up leaves them.
	twoLimits, err := quota.NewPlan("bench2", quota.PerSecond(benchPerSecond), quota.Limit{Name: "burst", Max: benchPerSecond / 5, Window: 200 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	impls := []struct {
		name    string
		handler http.Handler
	}{
		{"bare", ok},
		{"httprate", httprate.LimitBy(benchPerSecond, time.Second, byIP)(ok)},
		{"quotahttp", quotahttp.Limit(quota.NewMemory(time.Now), plan)(ok)},
		// The same headers as httprate's: no RateLimit-Policy and RateLimit.
		{"quotahttp-xheaders", quotahttp.Limit(quota.NewMemory(time.Now), plan, quotahttp.WithHeaders(quotahttp.HeadersX|quotahttp.HeaderRetryAfter))(ok)},
		{"quotahttp-2limits", quotahttp.Limit(quota.NewMemory(time.Now), twoLimits)(ok)},
	}
	const clients = 1000
	reqs := make([]*http.Request, clients)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/search", nil)
		reqs[i].RemoteAddr = "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250) + ":4000"
	}
	for _, impl := range impls {
		warmed := false
		b.Run("impl="+impl.name, func(b *testing.B) {
			if !warmed { // once, before the first of the runs -count asks for
				warm(impl.handler, reqs)
				warmed = true
				b.ResetTimer()
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: make(http.Header)}
				for pb.Next() {
					clear(w.h)
					impl.handler.ServeHTTP(w, reqs[next.Add(1)%clients])
				}
			})
		})
	}
}

// warm serves reqs round and round to h for longer than the limiters'
// window, so that each client's state has grown to the size it keeps under
// this load: the runs then measure a limiter in service, not one filling
// its maps and logs (which made the first of ten runs the slowest).
func warm(h http.Handler, reqs []*http.Request) {
	w := &discardWriter{h: make(http.Header)}
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); {
		for _, r := range reqs {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	}
}

// discardWriter is a ResponseWriter that keeps nothing, so the benchmark
// measures the middleware rather than a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// byIP is httprate's KeyByIP, which it deprecates for keying on the TCP
// peer; that is what this benchmark wants, as the gate's default does.
func byIP(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return httprate.CanonicalizeIP(host), nil
}
