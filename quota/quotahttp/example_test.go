package quotahttp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// A server whose search costs more the more results it asks for: 300 units
// a minute per client address, shared by every server on the same Redis.
// Its Redis client never retries a command (a retried charge could be made
// twice) and bounds each by its context's deadline (the gate's time
// budget).
func Example() {
	opt, err := redis.ParseURL(redisURL()) // such as redis://127.0.0.1:6379/0
	if err != nil {
		log.Fatal(err)
	}
	opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		log.Fatal(err) // no Redis at start: a configuration to fix
	}
	plan, _ := quota.NewPlan("free", quota.PerMinute(300))
	gate := quotahttp.New(quota.NewRedis(rdb, quota.WithPrefix(examplePrefix())), quotahttp.WithPlan(plan),
		quotahttp.WithCost(func(r *http.Request) (int64, error) {
			n, err := strconv.Atoi(r.URL.Query().Get("results"))
			if err != nil || n < 1 || n > 1000 {
				return 0, badParameter("results must be a whole number in [1, 1000]")
			}
			return int64(1 + n/100), nil // 1 unit, and one more per hundred results
		}))
	mux := http.NewServeMux()
	mux.Handle("GET /search", gate.Handler(http.HandlerFunc(search)))
	srv := httptest.NewServer(mux) // a program serves it: http.ListenAndServe(":8080", mux)
	defer srv.Close()

	for _, results := range []string{"50", "1000", "lots"} {
		resp, err := http.Get(srv.URL + "/search?results=" + results)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("results=%s: %d cost=%s remaining=%s\n", results, resp.StatusCode, resp.Header.Get("X-RateLimit-Cost"), resp.Header.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// results=50: 200 cost=1 remaining=299
	// results=1000: 200 cost=11 remaining=288
	// results=lots: 400 cost= remaining=
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
// limit holds exactly across every server: here two servers, each with its
// own client, share a caller's 3 a minute. The time budget bounds how long
// a request waits for a slow node; failing closed, a request Redis does
// not answer in time is refused (503), not served unmetered.
func Example_cluster() {
	plan, _ := quota.NewPlan("free", quota.PerMinute(3), quota.PerDay(20_000))
	prefix := examplePrefix()
	newServer := func() http.Handler {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 clusterAddrs(), // such as 10.0.0.1:7000, 10.0.0.2:7000, 10.0.0.3:7000
			ContextTimeoutEnabled: true,
			MaxRetries:            -1, // a retried charge could be made twice
		})
		// Every master answers, or the configuration is to fix.
		if err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		}); err != nil {
			log.Fatal(err)
		}
		limit := quotahttp.Limit(quota.NewRedis(rdb, quota.WithPrefix(prefix)), plan,
			quotahttp.WithIdentity(func(r *http.Request) (string, error) {
				if key := r.Header.Get("X-API-Key"); key != "" {
					return key, nil
				}
				return quotahttp.ClientAddress(r)
			}),
			// The default budget is 50 ms; a server's first charge also
			// loads the script and the cluster's slots, which on a busy
			// shared machine (this example runs in CI) can take longer.
			quotahttp.WithTimeout(time.Second),
			quotahttp.WithFailClosed(),
		)
		return limit(http.HandlerFunc(search))
	}
	servers := []http.Handler{newServer(), newServer()}

	for i := range 4 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/search", nil)
		r.Header.Set("X-API-Key", "key-1")
		servers[i%2].ServeHTTP(w, r)
		fmt.Println("server", i%2+1, w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// server 1 200 2
	// server 2 200 1
	// server 1 200 0
	// server 2 429 0
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

// redisURL is the Redis the examples run against, and clusterAddrs the
// cluster; a program reads its own from its configuration.
func redisURL() string       { return quotatest.ExampleURL() }
func clusterAddrs() []string { return quotatest.ExampleClusterAddrs() }

// examplePrefix keeps each run's keys apart from those of every other
// run, test and program sharing the Redis.
func examplePrefix() string { return fmt.Sprintf("example:%d:", time.Now().UnixNano()) }
