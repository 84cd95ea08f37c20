package quotahttp_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// A server whose search costs more the more results it asks for: 300 units
// a minute per client address, shared by every server on the same Redis.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
	plan, _ := quota.NewPlan("free", quota.PerMinute(300))
	gate := quotahttp.New(quota.NewRedis(rdb), quotahttp.WithPlan(plan),
		quotahttp.WithCost(func(r *http.Request) (int64, error) {
			n, err := strconv.Atoi(r.URL.Query().Get("results"))
			if err != nil || n < 1 || n > 1000 {
				return 0, badParameter("results must be a whole number in [1, 1000]")
			}
			return int64(1 + n/100), nil // 1 unit, and one more per hundred results
		}))
	http.Handle("GET /search", gate.Handler(http.HandlerFunc(search)))
	log.Fatal(http.ListenAndServe(":8080", nil))
}

// badParameter is a client's mistake: its HTTPStatus makes it a 400.
type badParameter string

func (e badParameter) Error() string   { return string(e) }
func (e badParameter) HTTPStatus() int { return http.StatusBadRequest }

func search(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "results") }

// A plan of several limits: a request is admitted only if its cost fits in
// every one, and the headers report them all. Here the 5-second burst
// limit refuses the fourth request while the month has plenty left.
func Example_multiLimit() {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	store := quota.NewMemory(func() time.Time { return now })
	plan, err := quota.NewPlan("pro",
		quota.Limit{Name: "burst", Max: 60, Window: 5 * time.Second},
		quota.PerMinute(300),
		quota.PerMonth(100_000),
	)
	if err != nil {
		log.Fatal(err)
	}
	gate := quotahttp.New(store, quotahttp.WithPlan(plan),
		quotahttp.WithCost(func(*http.Request) (int64, error) { return 20, nil }))
	h := gate.Handler(http.HandlerFunc(search))

	for range 4 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/search", nil)
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "burst";r=40;t=5, "minute";r=280;t=60, "month";r=99980;t=2646000
	// 200 "burst";r=20;t=5, "minute";r=260;t=60, "month";r=99960;t=2646000
	// 200 "burst";r=0;t=5, "minute";r=240;t=60, "month";r=99940;t=2646000
	// 429 "burst";r=0;t=5, "minute";r=240;t=60, "month";r=99940;t=2646000
}

// A handler that fails gives its charge back (the gate refunds any 5xx);
// one that learns its real cost while it works settles for it before it
// answers. The client sees both in the headers.
func Example_refundAndSettle() {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	store := quota.NewMemory(func() time.Time { return now })
	plan, _ := quota.NewPlan("free", quota.PerMinute(100))
	gate := quotahttp.New(store, quotahttp.WithPlan(plan),
		quotahttp.WithCost(func(*http.Request) (int64, error) { return 10, nil })) // the worst case, up front

	export := gate.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fail") != "" {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		rows := 300 // what the export really read: 3 units
		if err := quotahttp.Settle(r.Context(), int64(rows/100)); err != nil {
			log.Print(err) // the request stays charged its price
		}
		fmt.Fprintln(w, "exported")
	}))

	for _, target := range []string{"/export?fail=1", "/export"} {
		w := httptest.NewRecorder()
		export.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		h := w.Header()
		fmt.Printf("%d %s remaining=%s settled=%q\n", w.Code, h.Get("X-Quota-Status"), h.Get("X-RateLimit-Remaining"), h.Get("X-Quota-Settled-Cost"))
	}
	// Output:
	// 503 refunded remaining=100 settled=""
	// 200 charged remaining=97 settled="3"
}

// On a Redis Cluster each caller's quota lives in one hash slot, so one
// limit still holds exactly across every server; the in-flight time budget
// bounds how long a request waits for a slow node.
func Example_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // a retried charge could be made twice
	})
	plan, _ := quota.NewPlan("free", quota.PerMinute(300), quota.PerDay(20_000))
	limit := quotahttp.Limit(quota.NewRedis(rdb), plan,
		quotahttp.WithIdentity(func(r *http.Request) (string, error) {
			if key := r.Header.Get("X-API-Key"); key != "" {
				return key, nil
			}
			return quotahttp.ClientAddress(r)
		}),
		quotahttp.WithTimeout(30*time.Millisecond),
		quotahttp.WithFailClosed(),
	)
	http.Handle("/", limit(http.HandlerFunc(search)))
}

// Within one process, the in-memory store needs no Redis: the same exact
// log, in a map. Put a DenyCache in front of any store so a client that
// keeps hammering after its 429 costs nothing until its retry time.
func Example_memory() {
	store := quota.NewDenyCache(quota.NewMemory(time.Now))
	plan, _ := quota.NewPlan("local", quota.PerSecond(2))
	h := quotahttp.Limit(store, plan)(http.HandlerFunc(search))

	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil))
		fmt.Println(w.Code, w.Header().Get("X-Quota-Status"))
	}
	// Output:
	// 200 charged
	// 200 charged
	// 429 refused
}
