package faults

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/loadtest"
)

// The phases of each run: load alone, the fault, and after it is lifted.
// Every request that starts more than recovery after the lift must be
// metered again.
const (
	calm     = time.Second
	faultFor = 1500 * time.Millisecond
	after    = 2 * time.Second
	recovery = time.Second
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tileapi-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if bin, err = loadtest.Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = spatialtest.Run(m)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// fault is one way for Redis or PostgreSQL to fail.
type fault struct {
	name    string
	replica bool // the rig needs a replica of its Redis
	// clients is how many clients drive the rig; 0 for clients.
	clients int
	// inFlight limits each key to as many requests in flight at once, on
	// a short lease (inFlightLease): one slot left taken by the fault
	// refuses a request 429 concurrency-exceeded. 0: no limit.
	inFlight int
	// limits replaces faultPlan's limits; the first is the one whose
	// usage the checks read.
	limits []loadtest.Limit
	// env is added to the servers' environment.
	env []string
	// normal lists outcomes also allowed before the fault and once
	// recovered: a key with more clients than in-flight slots is refused
	// 429 concurrency-exceeded at any time.
	normal []string
	// unanswered says the fault may leave requests charged that no client
	// saw answered (a server killed with requests in flight): each key
	// may hold up to its in-flight slots times maxPrice units more than
	// its responses cost. The figure is logged.
	unanswered bool
	// inject starts the fault and returns what lifts it.
	inject func(t *testing.T, r *rig) (lift func())
	// allowed lists the outcomes a request that meets the fault may have,
	// failing closed or open; before the fault and once recovered, every
	// request is "200 charged" (or, where its quota call was late, what
	// redisFailing says).
	allowed func(closed bool) []string
	// atLift lists the outcomes also allowed of a request in flight when
	// the fault is lifted: a black hole resets the connections whose bytes
	// it dropped.
	atLift []string
	// bites says at least one request must meet the fault and not be
	// charged: the fault took effect.
	bites bool
	// readyz is what /readyz answers during the fault; nil: not asked.
	readyz func(closed bool) string
	// unknownKey: during the fault an unknown key must be answered 503
	// keys-unavailable.
	unknownKey bool
	// wait is the most the fault may add to a request's time.
	wait time.Duration
}

var faults = []fault{
	{name: "redis dead", bites: true, wait: redisWait, allowed: redisFailing, readyz: redisNotReady,
		inject: func(t *testing.T, r *rig) func() {
			r.hold(t)
			r.rproxy.Cut()
			return r.rproxy.Restore
		}},
	{name: "redis hung (SIGSTOP)", bites: true, wait: redisWait, allowed: redisFailing, readyz: redisNotReady,
		inject: func(t *testing.T, r *rig) func() {
			r.redis.Hang(t)
			return r.redis.Resume
		}},
	// Every slot of each key is in use when Redis stops: an acquire it runs
	// late, or a release it missed, would keep a slot taken after the lift.
	{name: "redis hung (SIGSTOP) with in-flight slots", inFlight: clients / keysPerRig, bites: true, wait: redisWait, allowed: redisFailing, readyz: redisNotReady,
		inject: func(t *testing.T, r *rig) func() {
			r.redis.Hang(t)
			return r.redis.Resume
		}},
	{name: "redis hung (black hole)", bites: true, wait: redisWait, allowed: redisFailing, readyz: redisNotReady,
		inject: func(t *testing.T, r *rig) func() {
			r.rproxy.BlackHole()
			return r.rproxy.Restore
		}},
	{name: "redis slow (200 ms)", bites: true, wait: redisWait, allowed: redisFailing, readyz: redisNotReady,
		inject: func(t *testing.T, r *rig) func() {
			r.rproxy.SetLatency(200*time.Millisecond, 0)
			return r.rproxy.Restore
		}},
	{name: "redis restarted", wait: redisWait, allowed: redisFailing,
		inject: func(t *testing.T, r *rig) func() {
			r.wipeFrom = time.Now()
			r.hold(t)
			for id, n := range r.usage(t) {
				r.wiped[id] += n
			}
			r.redis.Stop()
			if err := r.redis.Start(); err != nil {
				t.Fatal(err)
			}
			r.wipeTo = time.Now()
			r.rproxy.Restore()
			return func() {}
		}},
	// Redis at maxmemory with noeviction answers every write OOM at once:
	// a charge fails fast, as it does on a refused connection, not late.
	{name: "redis out of memory (maxmemory, noeviction)", bites: true, wait: redisWait, allowed: redisFailing,
		inject: func(t *testing.T, r *rig) func() {
			if err := redisDo(r.redis.Addr, "CONFIG", "SET", "maxmemory-policy", "noeviction", "maxmemory", "1"); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := redisDo(r.redis.Addr, "CONFIG", "SET", "maxmemory", "0"); err != nil {
					t.Error(err)
				}
			}
		}},
	// The quota's Lua is a function library, the in-flight leases' scripts:
	// both are flushed, and every call that meets either gone must load it.
	{name: "redis FUNCTION and SCRIPT FLUSH", wait: redisWait, allowed: func(bool) []string { return []string{charged} },
		inject: func(t *testing.T, r *rig) func() {
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					if err := redisDo(r.redis.Addr, "FUNCTION", "FLUSH"); err != nil {
						t.Error(err)
					}
					if err := redisDo(r.redis.Addr, "SCRIPT", "FLUSH"); err != nil {
						t.Error(err)
					}
					select {
					case <-done:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			})
			return func() { close(done); wg.Wait() }
		}},
	{name: "redis failed over", replica: true, wait: redisWait, allowed: redisFailing,
		inject: func(t *testing.T, r *rig) func() {
			r.hold(t)
			// The replica takes over once it has every write the primary
			// acknowledged, as a coordinated failover does.
			want := replOffset(t, r.redis.Addr, "master_repl_offset")
			for deadline := time.Now().Add(2 * time.Second); replOffset(t, r.replica.Addr, "master_repl_offset") < want; {
				if time.Now().After(deadline) {
					t.Fatal("the replica did not catch up with its primary")
				}
				time.Sleep(time.Millisecond)
			}
			if err := redisDo(r.replica.Addr, "REPLICAOF", "NO", "ONE"); err != nil {
				t.Fatal(err)
			}
			r.redis.Stop()
			r.redis, r.replica = r.replica, nil
			r.rproxy.Retarget(r.redis.Addr)
			r.rproxy.Restore()
			return func() {}
		}},
	// kill -9 of one server of two under 16 clients, two in-flight slots a
	// key (8 clients each, 4 on each server: refused concurrency-exceeded
	// at any time). Its requests in flight stay charged, at most its keys'
	// slots' worth, and its leases keep those slots for inFlightLease,
	// which ends within recovery of the lift: a key whose slots it all
	// held is refused until then, and then every key is served again by
	// the survivor, where its clients went.
	{name: "a server killed (SIGKILL)", clients: 2 * clients, inFlight: 2, normal: []string{concurrency},
		unanswered: true, bites: true, wait: failoverWait,
		allowed: func(bool) []string { return []string{charged, concurrency, "no response"} },
		inject: func(t *testing.T, r *rig) func() {
			r.kill(0)
			return func() {}
		}},
	{name: "postgres dead", bites: true, wait: dbWait, unknownKey: true,
		allowed: dbFailing("503 database-unavailable"),
		// A connection opened as the database comes back may hang until
		// the query timeout: a refunded 504 is as good an answer.
		atLift: []string{"504 query-timeout refunded"},
		inject: func(t *testing.T, r *rig) func() {
			r.dproxy.Cut()
			return r.dproxy.Restore
		}},
	// A black hole hangs the queries of open connections (504) and the
	// opening of new ones (503), whichever a request meets first.
	{name: "postgres hung", bites: true, wait: dbWait, unknownKey: true,
		allowed: dbFailing("504 query-timeout", "503 database-unavailable"),
		inject: func(t *testing.T, r *rig) func() {
			r.dproxy.BlackHole()
			return r.dproxy.Restore
		}},
}

// concurrency is the answer to a request over its key's in-flight slots.
const concurrency = "429 concurrency-exceeded"

// redisFailing is the failure policy for a Redis that does not answer.
func redisFailing(closed bool) []string {
	if closed {
		return []string{charged, "503 quota-unavailable"}
	}
	return []string{charged, pending}
}

// pending is a response served unmetered whose charge is made once Redis
// answers again: what it owes is in its X-RateLimit-Cost.
const pending = "200 unmetered-pending"

// dbFailing is the failure policy for a database that fails a request
// with one of problems: served from the tile cache, or the problem with the
// charge refunded; failing open, a request whose quota call was late was
// not charged, and has nothing to refund.
func dbFailing(problems ...string) func(closed bool) []string {
	return func(closed bool) []string {
		allowed := []string{charged}
		for _, p := range problems {
			// A refund Redis answers late goes on in the background.
			allowed = append(allowed, p+" refunded", p+" refund-pending")
			if !closed {
				allowed = append(allowed, p+" unmetered")
			}
		}
		return allowed
	}
}

// redisNotReady is /readyz while Redis does not answer: it says so, and
// takes the server out of rotation only if the server fails closed.
func redisNotReady(closed bool) string {
	if closed {
		return "503 redis failing"
	}
	return "200 redis failing"
}

func TestFaults(t *testing.T) {
	db := loadedDatabase(t)
	var rows []row
	for _, f := range faults {
		for _, closed := range []bool{false, true} {
			policy := "fail-open"
			if closed {
				policy = "fail-closed"
			}
			t.Run(f.name+"/"+policy, func(t *testing.T) {
				rw := runFault(t, db, f, closed)
				rw.fault, rw.policy = f.name, policy
				rows = append(rows, rw)
			})
		}
	}
	t.Run("redis restarted with the ledger/fail-closed", func(t *testing.T) { runLedgerRestart(t, db) })
	if testing.Verbose() {
		t.Logf("\n%s", table(rows))
	}
}

// row is what one run observed, for the table.
type row struct {
	fault, policy string
	requests      int
	during        map[string]int // outcomes of the requests that met the fault
	worst         time.Duration  // of any request
	budget        time.Duration
	readyz        string
	late          int           // requests outside the fault not charged because Redis answered late
	recovered     time.Duration // from the lift to the end of the last request not charged
	usage, served int64         // units in the quota, units of responses served as charged
}

// runFault drives the rig's servers, injects f, lifts it, and checks the
// four properties.
func runFault(t *testing.T, db string, f fault, closed bool) row {
	r := newRig(t, db, closed, f)
	hc := newHTTPClient(r.clients)
	stop := drive(t, hc, r)
	time.Sleep(calm)

	rw := row{during: map[string]int{}}
	start := time.Now()
	lift := f.inject(t, r)
	time.Sleep(faultFor / 2)
	var probes []result
	if f.readyz != nil {
		got, took := readiness(hc, r.adminURLs[0])
		rw.readyz = fmt.Sprintf("%s (%d ms)", got, took.Milliseconds())
		if want := f.readyz(closed); got != want {
			t.Errorf("/readyz during the fault: %q; want %q", got, want)
		}
	}
	if f.unknownKey {
		probes = append(probes, get(hc, r.urls[0], searches[0], "unknown-"+randomHex(), "unknown-key"))
	}
	time.Sleep(time.Until(start.Add(faultFor)))
	lifting := time.Now()
	lift()
	lifted := time.Now()
	time.Sleep(after)
	results := stop()
	rw.requests = len(results) + len(probes)

	// The worst request time stays within the budget. A database query
	// that ran out of time (slowQuery) is bounded by the query timeout,
	// not by the fault: on a loaded machine it can come at any time, and
	// the outcome checks below accept it, its charge given back.
	var worst result
	work := minWork
	for _, res := range append(results, probes...) {
		if res.slowQuery() {
			continue
		}
		if res.took() > worst.took() {
			worst = res
		}
		if res.end.Before(start) {
			work = max(work, res.took())
		}
	}
	rw.worst, rw.budget = worst.took(), f.wait+work+margin
	if rw.worst > rw.budget {
		t.Errorf("the slowest request took %v, over the budget of %v (%v for the fault, %v of work, %v margin): %s %s, %s, started %v after the fault%s",
			rw.worst.Round(time.Millisecond), rw.budget.Round(time.Millisecond), f.wait, work.Round(time.Millisecond), margin,
			worst.id, worst.path, worst.outcome(), worst.start.Sub(start).Round(time.Millisecond), r.logOf(worst.id))
	}

	// The status codes are what the policy says. On a loaded machine a
	// Redis call can outlast the quota timeout at any time, and the policy's
	// answer to that is right at any time; it is told from a fault that
	// fails fast (a NOSCRIPT let through, a refused connection) by the time
	// the request waited.
	allowed := f.allowed(closed)
	bad := map[string][]result{}
	var met, recovered, stillLate int // requests that met the fault and were not charged; requests after recovery; late ones of those
	// servedAgain counts each key's requests charged after recovery.
	servedAgain := make([]int, len(r.keys))
	for _, res := range results {
		o := res.outcome()
		late := res.late(closed)
		excused := late || res.slowQuery() || slices.Contains(f.normal, o)
		switch {
		case res.end.Before(start):
			if o != charged && !excused {
				bad["before the fault: "+o] = append(bad["before the fault: "+o], res)
			}
			rw.late += b2i(late)
		case res.start.After(lifted.Add(recovery)):
			recovered++
			servedAgain[res.key] += b2i(o == charged)
			if o != charged && !excused {
				k := fmt.Sprintf("%v after the fault was lifted: %s", recovery, o)
				bad[k] = append(bad[k], res)
			}
			stillLate += b2i(late)
			rw.late += b2i(late)
		case res.start.After(lifted):
			if !slices.Contains(allowed, o) && !slices.Contains(f.atLift, o) && !excused {
				bad["as the fault was lifted: "+o] = append(bad["as the fault was lifted: "+o], res)
			}
		default:
			rw.during[o]++
			met += b2i(o != charged && !slices.Contains(f.normal, o))
			atLift := res.end.After(lifting) && slices.Contains(f.atLift, o)
			if !slices.Contains(allowed, o) && !atLift && !excused {
				bad["during the fault: "+o] = append(bad["during the fault: "+o], res)
			}
		}
		if o != charged && res.start.After(lifted) {
			rw.recovered = max(rw.recovered, res.end.Sub(lifted))
		}
	}
	for _, p := range probes {
		o := p.outcome()
		rw.during["unknown key: "+o]++
		if o != "503 keys-unavailable" {
			bad["an unknown key during the fault: "+o] = append(bad["an unknown key during the fault: "+o], p)
		}
	}
	for _, o := range slices.Sorted(maps.Keys(bad)) {
		first := bad[o][0]
		t.Errorf("%d responses %s (allowed during the fault: %s); the first: %s %s after %v%s",
			len(bad[o]), o, strings.Join(allowed, ", "), first.id, first.path, first.took().Round(time.Millisecond), r.logOf(first.id))
	}
	if f.bites && met == 0 {
		t.Errorf("no request met the fault: it did not take effect")
	}

	// The service recovers without a restart: after the lift, all but a few
	// requests that waited out the quota timeout are charged again.
	if recovered == 0 || stillLate*20 > recovered {
		t.Errorf("not recovered: %d of the %d requests that started more than %v after the fault was lifted were not charged",
			stillLate, recovered, recovery)
	}
	// Every key is served again: a slot left taken for good refuses every
	// request of its key, which may look normal one by one.
	for i, n := range servedAgain {
		if n == 0 {
			t.Errorf("not recovered: key %d had none of its requests charged more than %v after the fault was lifted", r.keys[i].id, recovery)
		}
	}

	// Nothing is charged that was not served, and nothing served is
	// forgotten. Failing open, a response served unmetered owes its price,
	// charged once Redis answers: the quota holds it once every server has
	// made what it owes. A charge made in time whose reply came back too
	// late was served unmetered and owed as well: the quota may hold its
	// cost twice, which is no more than the price of a request (maxPrice)
	// more for each such response.
	// Failing closed, a charge made in time whose reply was read late (past
	// the caller's deadline, on a loaded machine) leaves a refused request
	// charged: the server cannot know; such a request is among the late
	// ones, and may hold one request's price.
	// A restart that empties Redis also takes what the servers still owed
	// the logs it emptied: a cached tile's settlement from its miss price
	// down to its hit price, or a refund, made in the background after the
	// answer and so after the usage was read, finds no log to lower. The
	// quota held such a request at its full price when it was wiped: at
	// most maxPrice more for each tile hit or refund answered about then
	// (from wipeGrace before the hold to the restart's end).
	served, unmetered, owedAtWipe := map[int64]int64{}, map[int64]int64{}, map[int64]int64{}
	for _, res := range results {
		o := res.outcome()
		if o == charged || o == pending {
			served[r.keys[res.key].id] += res.cost
		}
		if o == "200 unmetered" || res.late(closed) {
			unmetered[r.keys[res.key].id]++
		}
		if !r.wipeFrom.IsZero() && (res.tileHit || strings.HasSuffix(o, " refunded") || strings.HasSuffix(o, " refund-pending")) &&
			res.end.After(r.wipeFrom.Add(-wipeGrace)) && res.end.Before(r.wipeTo) {
			owedAtWipe[r.keys[res.key].id]++
		}
	}
	r.drained(t)
	// A server killed with requests in flight leaves them charged, never
	// answered: at most a key's in-flight slots of them, each at most
	// maxPrice. Nothing gives them back.
	var unanswered int64
	if f.unanswered {
		unanswered = int64(f.inFlight) * maxPrice
	}
	usage := r.usage(t)
	for _, k := range r.keys {
		got, want := usage[k.id]+r.wiped[k.id], served[k.id]
		rw.usage += got
		rw.served += want
		if f.unanswered {
			t.Logf("key %d: %d units left charged for requests never answered (%d in the quota, %d served as charged; at most %d: %d in-flight slots of %d units)",
				k.id, got-want, got, want, unanswered, f.inFlight, maxPrice)
		}
		switch {
		case got > want+maxPrice*(unmetered[k.id]+owedAtWipe[k.id])+unanswered:
			t.Errorf("key %d: the quota holds %d units, the responses served as charged or owed cost %d, %d more were served unmetered or refused late, %d settled or refunded as Redis was emptied, and %d may be left by requests never answered: %d units charged that were not served",
				k.id, got, want, unmetered[k.id], owedAtWipe[k.id], unanswered, got-want-maxPrice*(unmetered[k.id]+owedAtWipe[k.id])-unanswered)
		case got < want:
			t.Errorf("key %d: the quota holds %d units, the responses served as charged or owed cost %d: %d units served that it does not hold",
				k.id, got, want, want-got)
		}
	}
	return rw
}

// table formats the rows as a Markdown table.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| fault | policy | requests | responses that met the fault | worst ms (budget) | /readyz during | last failure after lift | late quota calls outside the fault | quota units / served as charged |\n")
	b.WriteString("| --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: |\n")
	for _, rw := range rows {
		outcomes := slices.SortedFunc(maps.Keys(rw.during), func(a, b string) int {
			return cmp.Or(cmp.Compare(rw.during[b], rw.during[a]), cmp.Compare(a, b))
		})
		var parts []string
		for _, o := range outcomes {
			parts = append(parts, fmt.Sprintf("%s: %d", o, rw.during[o]))
		}
		readyz := cmp.Or(rw.readyz, "-")
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d (%d) | %s | %d ms | %d | %d / %d |\n",
			rw.fault, rw.policy, rw.requests, strings.Join(parts, ", "),
			rw.worst.Milliseconds(), rw.budget.Milliseconds(), readyz, rw.recovered.Milliseconds(), rw.late, rw.usage, rw.served)
	}
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
