package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// The Sentinel form of REDIS_URL: the URL's credentials are the
// primary's, the Sentinels' come from sentinel_username= and
// sentinel_password=, and a client never sends a command again.
func TestSentinelURL(t *testing.T) {
	const sentinels = "sentinel1:26379?master_name=mymaster&addr=sentinel2:26379&addr=sentinel3:26379"
	for _, tc := range []struct {
		url                            string
		user, password                 string // the primary's
		sentinelUser, sentinelPassword string
		err                            string // in the error, if any
	}{
		{url: "redis://" + sentinels},
		{url: "redis://:pw@" + sentinels, password: "pw"},
		{url: "redis://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379,%20sentinel3:26379,"},
		{url: "redis://app:pw@" + sentinels + "&sentinel_password=spw", user: "app", password: "pw", sentinelPassword: "spw"},
		{url: "redis://" + sentinels + "&password=pw&sentinel_username=s&sentinel_password=spw", password: "pw", sentinelUser: "s", sentinelPassword: "spw"},
		{url: "redis://:pw@" + sentinels + "&password=other", err: "given twice"},
		{url: "redis://" + sentinels + "&replica_only=true", err: "replicas"},
		{url: "redis://" + sentinels + "&route_randomly=true", err: "replicas"},
		{url: "redis://sentinel1:26379?master_name=", err: "master_name is empty"},
		{url: "redis://:secret@" + sentinels + "&frobnicate=1", err: "unexpected option"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			opt, err := failoverOptions("REDIS_URL", tc.url)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "REDIS_URL: ") {
					t.Fatalf("err %v, want one of REDIS_URL with %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"sentinel1:26379", "sentinel2:26379", "sentinel3:26379"}
			if opt.MasterName != "mymaster" || !slices.Equal(opt.SentinelAddrs, want) {
				t.Errorf("master %q at sentinels %v, want mymaster at %v", opt.MasterName, opt.SentinelAddrs, want)
			}
			if opt.Username != tc.user || opt.Password != tc.password || opt.SentinelUsername != tc.sentinelUser || opt.SentinelPassword != tc.sentinelPassword {
				t.Errorf("primary %q:%q, sentinels %q:%q; want %q:%q, %q:%q", opt.Username, opt.Password, opt.SentinelUsername, opt.SentinelPassword,
					tc.user, tc.password, tc.sentinelUser, tc.sentinelPassword)
			}
			if opt.MaxRetries != -1 || !opt.ContextTimeoutEnabled {
				t.Errorf("MaxRetries %d, ContextTimeoutEnabled %v: a command may be sent twice, or outlive its deadline", opt.MaxRetries, opt.ContextTimeoutEnabled)
			}
		})
	}
}

// What a failover keeps, under load. Two servers (each a client opened by
// openRedis, a quota store and a usage ledger of its own, as serve wires
// them) charge one key's month concurrently; when half of it is spent,
// Redis fails: a Sentinel-managed primary is killed (SIGKILL) and its
// replica promoted, with the replica in sync or with its link cut a
// quarter of the month before, or a lone Redis is killed and restarted
// empty. The servers go on until the month is spent.
//
// The month is served past its max by at most what the servers admit in
// two flush intervals (the rows they hold unwritten when the ledger
// raises, or restores, the counter Redis lost, and the time a write
// takes). The figures are logged:
//
//	go test ./cmd/tileapi -run FailoverUnderLoad -v
func TestFailoverUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		// start starts Redis and returns its REDIS_URL, what cuts a
		// replica's link (nil for none), and what makes Redis fail and
		// returns once it serves again.
		start func(t *testing.T) (url string, cut, fail func())
	}{
		{"sentinel", func(t *testing.T) (string, func(), func()) {
			s := quotatest.StartSentinels(t)
			return s.URL(), nil, func() { s.KillPrimary(); s.WaitFailover(t, 30*time.Second) }
		}},
		{"sentinel, replica's link cut", func(t *testing.T) (string, func(), func()) {
			s := quotatest.StartSentinels(t)
			return s.URL(), func() { s.CutReplica(t) }, func() { s.KillPrimary(); s.WaitFailover(t, 30*time.Second) }
		}},
		{"one node, restarted", func(t *testing.T) (string, func(), func()) {
			srv := quotatest.StartRedisServer(t)
			return "redis://" + srv.Addr + "/0", nil, func() {
				srv.Stop()
				if err := srv.Start(); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := spatialtest.Migrated(t)
			url, cut, fail := tc.start(t)
			const (
				month = 12_000
				flush = 50 * time.Millisecond
				slots = 4 // in-flight leases held through the fault
			)
			plan, err := quota.NewPlan("monthly", quota.Limit{Name: "hour", Max: 1 << 30, Window: time.Hour}, quota.PerMonth(month))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type server struct {
				client redis.UniversalClient
				store  quota.Store
			}
			var servers []server
			for range 2 {
				client, err := openRedis("REDIS_URL", url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { client.Close() })
				l := ledger.New(pool, ledger.Options{FlushEvery: flush})
				r := quota.NewRedis(client, quota.WithPeriodSource(l))
				l.RaiseIn(r)
				go l.Run(ctx)
				servers = append(servers, server{client, l.Store(r)})
			}

			// Four clients, two a server, each charging 1 unit at a time
			// and noting when each was admitted and when each failed.
			var (
				admitted         atomic.Int64
				refused          atomic.Int64
				slowest          time.Duration // the longest a failed charge took
				mu               sync.Mutex
				admits, failures []time.Time
				stop             = make(chan struct{})
				wg               sync.WaitGroup
			)
			for g := range 4 {
				wg.Go(func() {
					var in, failed []time.Time
					var slowestMine time.Duration
					defer func() {
						mu.Lock()
						defer mu.Unlock()
						admits, failures = append(admits, in...), append(failures, failed...)
						slowest = max(slowest, slowestMine)
					}()
					s := servers[g%2]
					for {
						select {
						case <-stop:
							return
						default:
						}
						start := time.Now()
						cctx, ccancel := context.WithTimeout(ctx, time.Second)
						d, err := s.store.Charge(cctx, "key:1", plan, 1)
						ccancel()
						switch {
						case err != nil:
							failed = append(failed, time.Now())
							slowestMine = max(slowestMine, time.Since(start))
							time.Sleep(5 * time.Millisecond) // Redis is failing over: do not spin
						case d.Allowed:
							admitted.Add(1)
							in = append(in, time.Now())
						default:
							refused.Add(1)
						}
					}
				})
			}
			waitFor := func(units int64) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for admitted.Load() < units {
					if time.Now().After(deadline) {
						t.Fatalf("only %d units admitted in 30 s, waiting for %d", admitted.Load(), units)
					}
					time.Sleep(time.Millisecond)
				}
			}

			waitFor(month / 4)
			if cut != nil {
				cut()
			}
			waitFor(month / 2)
			// Leases held through the fault, as by requests in flight.
			leases := inflight.NewRedis(servers[0].client, inflight.WithLease(time.Minute))
			for range slots {
				if _, denial, err := leases.Acquire(ctx, "key:1", slots); err != nil || denial != nil {
					t.Fatalf("acquire: %v %v", denial, err)
				}
			}
			// held is what the servers had admitted and not yet written to the
			// ledger when Redis failed (give or take the charges in flight).
			var written int64
			if err := pool.QueryRow(ctx, `SELECT coalesce(sum(units), 0) FROM quota_ledger WHERE identity = 'key:1'`).Scan(&written); err != nil {
				t.Fatal(err)
			}
			held := admitted.Load() - written
			failedAt := time.Now()
			fail()
			served := time.Since(failedAt)

			// Until the month is spent and refusals are all that is left.
			deadline := time.Now().Add(30 * time.Second)
			for {
				before, refusals := admitted.Load(), refused.Load()
				time.Sleep(300 * time.Millisecond)
				if admitted.Load() == before && refused.Load() > refusals {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d units admitted of a %d-unit month in 30 s after the fault", admitted.Load(), int64(month))
				}
			}
			close(stop)
			wg.Wait()

			// The leases still held: how many more a key of 4 slots is refused.
			kept := slots
			for range slots {
				if _, denial, err := leases.Acquire(ctx, "key:1", slots); err != nil {
					t.Fatal(err)
				} else if denial == nil {
					kept--
				}
			}
			// What Redis counts in the key's sliding hour (never restored)
			// and in its month.
			d, err := quota.NewRedis(servers[0].client).Peek(ctx, "key:1", plan)
			if err != nil {
				t.Fatal(err)
			}
			hour, monthUsed := d.Limits[0].Used, d.Limits[1].Used

			slices.SortFunc(admits, time.Time.Compare)
			slices.SortFunc(failures, time.Time.Compare)
			// bound is the most units admitted in any two flush intervals.
			var bound int64
			for i, j := 0, 0; j < len(admits); j++ {
				for admits[j].Sub(admits[i]) > 2*flush {
					i++
				}
				bound = max(bound, int64(j-i+1))
			}
			var outage [2]time.Duration // the first and last failure, after the fault
			if n := len(failures); n > 0 {
				outage = [2]time.Duration{failures[0].Sub(failedAt), failures[n-1].Sub(failedAt)}
			}

			total := admitted.Load()
			over := total - month
			t.Logf("%s: served %d units of a %d-unit month: %d over (bound %d, the most admitted in two %v flush intervals; %d held unwritten when Redis failed)",
				tc.name, total, int64(month), over, bound, flush, held)
			t.Logf("%s: Redis served again %v after the fault; %d charges failed, from %v to %v after it, each in at most %v",
				tc.name, served.Round(time.Millisecond), len(failures), outage[0].Round(time.Millisecond), outage[1].Round(time.Millisecond),
				slowest.Round(time.Millisecond))
			t.Logf("%s: the sliding hour counts %d of %d units (%d lost); the month counter %d; %d of %d in-flight leases kept",
				tc.name, hour, total, total-hour, monthUsed, kept, slots)
			// A charge whose answer the dying primary never sent may have
			// been counted: at most one a failure.
			if total < month-int64(len(failures)) {
				t.Errorf("only %d of the month's %d units served, with %d charges failed", total, int64(month), len(failures))
			}
			if over > bound {
				t.Errorf("%d units served over the month, more than the %d admitted in two flush intervals", over, bound)
			}
		})
	}
}

// serve with a Sentinel REDIS_URL charges through the primary, and through
// the replica once the Sentinels have promoted it: failing closed, a
// request is answered 200 only when its charge was made.
func TestServeThroughSentinelFailover(t *testing.T) {
	s := quotatest.StartSentinels(t)
	plansFile := filepath.Join(t.TempDir(), "plans.json")
	err := os.WriteFile(plansFile, []byte(`{"plans": [{"name": "p", "max_radius_m": 20000,
		"limits": [{"name": "minute", "max": 1000, "window": "1m"}]}]}`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	in := startServe(t, map[string]string{
		"REDIS_URL":             s.URL(),
		"TILEAPI_PLANS_FILE":    plansFile,
		"TILEAPI_DEMO_KEYS":     "k:p",
		"TILEAPI_QUOTA_FAILURE": "closed",
		"TILEAPI_QUOTA_TIMEOUT": "1s",
	})
	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, in.url+"/v1/geofence/within?lng=13.4&lat=52.5&limit=1&radius=2000", nil)
		req.Header.Set("X-API-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("before the failover: status %d\n%s", code, in.stderr)
	}
	s.KillPrimary()
	s.WaitFailover(t, 30*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for get() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("no request charged in 10 s after the failover\n%s", in.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
