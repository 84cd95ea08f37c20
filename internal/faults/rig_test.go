package faults

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/loadtest"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/quotatest/faultproxy"
)

// The servers' configuration, and the bounds the suite holds them to.
const (
	// quotaTimeout is TILEAPI_QUOTA_TIMEOUT: above what a call takes on a
	// loaded 2-core machine, below the slow fault's 200 ms.
	quotaTimeout = 150 * time.Millisecond
	queryTimeout = time.Second // TILEAPI_QUERY_TIMEOUT
	// redisWait and dbWait are the most a fault may add to a request: each
	// Redis call it makes (the key guard, the tile cache, the charge) waits
	// at most quotaTimeout, and a database call at most queryTimeout. (A
	// charge that Redis answers as late, within the budget, is tried again,
	// up to three budgets in all; a slowed Redis here answers after the
	// budget, so no fault makes that happen.)
	redisWait = 4 * quotaTimeout
	dbWait    = queryTimeout + 2*quotaTimeout
	// A request's own work (a query, a render) is taken to be the slowest
	// request before the fault, and at least minWork: on a shared 2-core
	// machine it varies with whatever else runs. margin is for the noise
	// beyond.
	minWork = 100 * time.Millisecond
	margin  = 250 * time.Millisecond
	// failoverWait is what a server killed adds to a request: the
	// survivor takes its clients at once, twice the load on the machine.
	failoverWait = 500 * time.Millisecond

	// wipeGrace is how long before a restart's hold an answer's
	// settlement or refund, sent in the background, may not yet have
	// reached Redis: one budget for it, one for a try again.
	wipeGrace = 2 * quotaTimeout

	servers    = 2 // tileapi serve processes, sharing Redis and the database
	keysPerRig = 2
	planName   = "fault"
)

// inFlightLease is TILEAPI_IN_FLIGHT_LEASE: a slot left taken at the lift
// would refuse requests until the run ends.
const inFlightLease = after

// faultPlan never denies: every request is charged or fails for the fault,
// and the quota's one limit holds every charge of a run.
var faultPlan = loadtest.Plan{Name: planName, MaxRadius: 20000,
	Limits: []loadtest.Limit{{Name: "hour", Max: 1_000_000_000, Window: time.Hour}}}

// bin is the tileapi binary TestMain built.
var bin string

// database is the schema the suite loads once, shared by its rigs, which
// only read it (and add their demo keys).
var database struct {
	once sync.Once
	url  string
	err  error
}

// loadedDatabase returns the URL of a schema migrated and loaded by
// `tileapi load`, made the first time it is asked for and dropped when tb
// ends: call it first from the test that runs the others.
func loadedDatabase(tb testing.TB) string {
	tb.Helper()
	database.once.Do(func() {
		u := spatialtest.Schema(tb)
		cmd := exec.Command(bin, "load")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+u)
		if out, err := cmd.CombinedOutput(); err != nil {
			database.err = fmt.Errorf("tileapi load: %w\n%s", err, out)
			return
		}
		database.url = u
	})
	if database.err != nil {
		tb.Fatal(database.err)
	}
	return database.url
}

// rig is one fault's world: a Redis (and for a failover its replica), a
// proxy in front of each of Redis and PostgreSQL, and tileapi servers that
// reach both through the proxies.
type rig struct {
	redis   *quotatest.RedisServer // the primary: after a failover, the old replica
	replica *quotatest.RedisServer // nil unless the fault needs one
	rproxy  *faultproxy.Proxy      // in front of Redis
	dproxy  *faultproxy.Proxy      // in front of PostgreSQL
	urls    []string               // the servers
	// adminURLs are the servers' admin listeners, in the order of urls.
	adminURLs []string
	servers   []*loadtest.Instance // in the order of urls
	// dead marks the servers killed: their clients go to the next one, as
	// a load balancer would send them.
	dead    [servers]atomic.Bool
	clients int
	db      string // the database, reached directly
	keys    []apiKey
	// charged is what each key's responses served as charged cost so far,
	// in the order of keys.
	charged [keysPerRig]atomic.Int64
	plan    quota.Plan
	// wiped is each key's usage in a Redis that a restart emptied, and
	// wipeFrom and wipeTo when that was: from the hold before the restart
	// to its end.
	wiped            map[int64]int64
	wipeFrom, wipeTo time.Time
	log              string // the servers' output
}

// logOf returns the servers' log line of the request with id, on a line of
// its own, or "" if there is none.
func (r *rig) logOf(id string) string {
	b, _ := os.ReadFile(r.log)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"request_id":"`+id+`"`) {
			return "\n" + line
		}
	}
	return ""
}

// apiKey is a key the load is charged to.
type apiKey struct {
	secret string
	id     int64
}

// newRig starts the rig of one test, with the servers failing closed or
// open, and stops it when t ends.
func newRig(t *testing.T, dbURL string, closed bool, f fault) *rig {
	t.Helper()
	// A replica's first sync starts at once, not after the default 5 s.
	r := &rig{redis: quotatest.StartRedisServer(t, "--repl-diskless-sync-delay", "0"), wiped: map[int64]int64{},
		clients: cmp.Or(f.clients, clients), db: dbURL}
	if f.replica {
		_, port, _ := net.SplitHostPort(r.redis.Addr)
		r.replica = quotatest.StartRedisServer(t, "--replicaof", "127.0.0.1", port)
		waitReplicaLinked(t, r.replica.Addr)
	}
	r.rproxy = startProxy(t, r.redis.Addr)
	du, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	dbAddr := du.Host
	if du.Port() == "" {
		dbAddr = net.JoinHostPort(du.Hostname(), "5432")
	}
	r.dproxy = startProxy(t, dbAddr)
	du.Host = r.dproxy.Addr()

	dir := t.TempDir()
	plan := faultPlan
	plan.MaxInFlight = f.inFlight
	if f.limits != nil {
		plan.Limits = f.limits
	}
	plansFile, err := loadtest.WritePlans(dir, plan)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := plans.Load(plansFile)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ps.Lookup(planName)
	r.plan = p.Quota

	// The keys are made before the servers start, so every server's key
	// index holds them from its first request.
	for i := range keysPerRig {
		k, err := loadtest.CreateKey(context.Background(), bin, []string{"DATABASE_URL=" + dbURL, "TILEAPI_PLANS_FILE=" + plansFile},
			planName, fmt.Sprintf("fault rig key %d", i))
		if err != nil {
			t.Fatal(err)
		}
		r.keys = append(r.keys, apiKey{secret: k.Secret, id: k.ID})
	}
	policy := "open"
	if closed {
		policy = "closed"
	}
	env := []string{
		"REDIS_URL=redis://" + r.rproxy.Addr() + "/0", "DATABASE_URL=" + du.String(),
		"TILEAPI_QUOTA_FAILURE=" + policy, "TILEAPI_QUOTA_TIMEOUT=" + quotaTimeout.String(),
		"TILEAPI_QUERY_TIMEOUT=" + queryTimeout.String(), "TILEAPI_PLANS_FILE=" + plansFile,
		"TILEAPI_LOG_LEVEL=info", // a line per request, for the requests a check names
		"TILEAPI_IN_FLIGHT_LEASE=" + inFlightLease.String(),
	}
	env = append(env, f.env...)
	logs, err := os.Create(filepath.Join(dir, "servers.log"))
	if err != nil {
		t.Fatal(err)
	}
	r.log = logs.Name()
	t.Cleanup(func() { logs.Close() })
	var wg sync.WaitGroup
	ins := make([]*loadtest.Instance, servers)
	errs := make([]error, servers)
	for i := range servers {
		wg.Go(func() { ins[i], errs[i] = loadtest.Start(context.Background(), bin, env, logs) })
	}
	wg.Wait()
	for i, in := range ins {
		if in != nil {
			t.Cleanup(func() { _ = in.Stop() })
			r.urls, r.adminURLs, r.servers = append(r.urls, in.URL), append(r.adminURLs, in.AdminURL), append(r.servers, in)
		}
		if errs[i] != nil {
			out, _ := os.ReadFile(r.log)
			t.Fatalf("%v; the servers' output:\n%s", errs[i], out[max(0, len(out)-4096):])
		}
	}
	return r
}

// server returns the URL client i sends its requests to: its own server
// or, once that is killed, the next one alive.
func (r *rig) server(i int) string {
	for j := range len(r.urls) {
		if k := (i + j) % len(r.urls); !r.dead[k].Load() {
			return r.urls[k]
		}
	}
	return r.urls[i%len(r.urls)]
}

// kill ends server i with SIGKILL under load: its requests in flight get
// no answer, and its clients go to the others from then on.
func (r *rig) kill(i int) {
	r.dead[i].Store(true)
	r.servers[i].Kill()
}

func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// usage returns each key's usage in the primary Redis, read directly, not
// through the proxy.
func (r *rig) usage(t *testing.T) map[int64]int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: r.redis.Addr})
	defer rdb.Close()
	q := quota.NewRedis(rdb, quota.WithPrefix(loadtest.DefaultPrefix)) // the servers run with the default -redis-prefix
	out := map[int64]int64{}
	for _, k := range r.keys {
		d, err := q.Peek(context.Background(), "key:"+strconv.FormatInt(k.id, 10), r.plan)
		if err != nil {
			t.Fatalf("peek key %d: %v", k.id, err)
		}
		out[k.id] = d.Limits[0].Used
	}
	return out
}

// drained waits until every server has made the charges it owes for the
// responses it served unmetered (X-Quota-Status: unmetered-pending): as
// many applied as queued, by its metrics.
func (r *rig) drained(t *testing.T) {
	t.Helper()
	for i, u := range r.urls {
		if r.dead[i].Load() {
			continue // what it owed is lost with it
		}
		// Every charge queued is applied, and the gate owes nothing more
		// (refunds, settlements, releases).
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			queued, applied := pendingCharges(t, u, "queued"), pendingCharges(t, u, "applied")
			owed := metricValue(t, u, "tileapi_quota_owed ")
			if queued == applied && owed == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still owes %d of the %d charges it queued, and %d calls in all, 30 s after the fault", u, queued-applied, queued, owed)
			}
		}
	}
}

// pendingCharges reads tileapi_quota_pending_charges_total{outcome} from
// the metrics of the server at base: 0 before the first.
func pendingCharges(t *testing.T, base, outcome string) int64 {
	t.Helper()
	return metricValue(t, base, `tileapi_quota_pending_charges_total{outcome="`+outcome+`"} `)
}

// metricValue reads the metric line that starts with name (its labels and
// a space included) from the metrics of the server at base: 0 if none.
func metricValue(t *testing.T, base, name string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %s", base, line)
			}
			return int64(n)
		}
	}
	return 0
}

// ledgerQuery is what the usage ledger holds of an identity's limit, in
// every period it counted.
const ledgerQuery = `SELECT coalesce(sum(units), 0)::bigint FROM quota_ledger WHERE identity = $1 AND limit_name = $2`

// ledger returns what the usage ledger in the database holds of each
// key's first limit, a calendar period.
func (r *rig) ledger(t *testing.T) map[int64]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	out := map[int64]int64{}
	for _, k := range r.keys {
		var n int64
		if err := conn.QueryRow(ctx, ledgerQuery, "key:"+strconv.FormatInt(k.id, 10), r.plan.Limits[0].Name).Scan(&n); err != nil {
			t.Fatalf("the ledger of key %d: %v", k.id, err)
		}
		out[k.id] = n
	}
	return out
}

// hold stops the traffic to Redis and waits until every command Redis ran
// has had its answer delivered: from then on no charge can be in doubt, so
// a fault that loses Redis's connections or its data after it cannot make
// one.
func (r *rig) hold(t *testing.T) {
	t.Helper()
	r.rproxy.BlackHole()
	if err := r.rproxy.Settle(2 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// redisDo runs one command on the Redis at addr.
func redisDo(addr string, args ...any) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Do(context.Background(), args...).Err(); err != nil {
		return fmt.Errorf("redis %v: %w", args, err)
	}
	return nil
}

func waitReplicaLinked(t *testing.T, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := rdb.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica at %s did not link to its primary:\n%s", addr, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replOffset reads the replication offset of a primary or a replica.
func replOffset(t *testing.T, addr, field string) int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in INFO replication of %s", field, addr)
	return 0
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
