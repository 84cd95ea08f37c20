package history

import (
	"context"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// durationFlag names the flag that runs the workloads longer (registered
// in TestMain, read with flag.Lookup: no package variable holds it).
const durationFlag = "history.duration"

// TestMain registers -history.duration and stops the servers the tests
// started for the whole binary.
func TestMain(m *testing.M) {
	flag.Duration(durationFlag, 0, "how long each history workload that should pass runs (0: 3s)")
	os.Exit(spatialtest.Run(m))
}

// runFor is how long a workload that should pass runs: -history.duration,
// or 3 s.
func runFor() time.Duration {
	if f := flag.Lookup(durationFlag); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 0 {
			return d
		}
	}
	return 3 * time.Second
}

// The workload's figures.
const (
	ledgerFlush = 100 * time.Millisecond
	// recordLag bounds how long after its admission a charge is recorded
	// in its server's ledger (the reply's way back from Redis): the
	// checker allows a fault to lose what was admitted since the oldest
	// of the ledgers' last complete writes, and this much before it.
	recordLag = 300 * time.Millisecond
	// meteredDay is the day of the metered identity: spent within the
	// first second, so every unit it is admitted after a restart that
	// forgot the day is over it.
	meteredDay  = 30
	callTimeout = 2 * time.Second
)

// plans returns the workload's plans, of longest windows 200 ms, 1 s and
// 3 s, each with a day of day units and the given History.
func plans(t *testing.T, day int64, history time.Duration) []quota.Plan {
	d := quota.Limit{Name: "day", Max: day, Period: quota.Day}
	ps := []quota.Plan{
		plan(t, "burst", quota.Limit{Name: "a", Max: 400, Window: 200 * ms}, d),
		plan(t, "steady", quota.Limit{Name: "a", Max: 500, Window: 200 * ms}, quota.Limit{Name: "b", Max: 1200, Window: time.Second}, d),
		plan(t, "long", quota.Limit{Name: "b", Max: 1000, Window: time.Second}, quota.Limit{Name: "c", Max: 2000, Window: 3 * time.Second}, d),
	}
	for i := range ps {
		ps[i].History = history
	}
	return ps
}

// identity is one identity of the workload and the plans it is charged
// under.
type identity struct {
	name  string
	plans []quota.Plan
}

// identities returns three identities whose day never binds and one
// metered by meteredDay, all re-planned among plans of the given History,
// named apart from any other run's.
func identities(t *testing.T, history time.Duration) []identity {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	free, metered := plans(t, quota.MaxUnits, history), plans(t, meteredDay, history)
	return []identity{
		{"a:" + run, free}, {"b:" + run, free}, {"c:" + run, free}, {"metered:" + run, metered},
	}
}

// newServers returns n servers, each a quota.Redis store on its own client
// from dial (which closes it when t ends), recorded in rec as "s0",
// "s1"...; with a pool, each has its own usage ledger in it (the store's
// quota.PeriodSource, raising its counters), as a tileapi process does.
func newServers(t *testing.T, rec *Recorder, n int, dial func() redis.UniversalClient, prefix string, pool *pgxpool.Pool) ([]quota.Store, []*ledger.Ledger) {
	t.Helper()
	var stores []quota.Store
	var ledgers []*ledger.Ledger
	for i := range n {
		client := dial() // closed when t ends
		name := "s" + strconv.Itoa(i)
		if pool == nil {
			stores = append(stores, rec.Store(name, quota.NewRedis(client, quota.WithPrefix(prefix))))
			continue
		}
		l := ledger.New(pool, ledger.Options{FlushEvery: ledgerFlush})
		r := quota.NewRedis(client, quota.WithPrefix(prefix), quota.WithPeriodSource(l))
		l.RaiseIn(r)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); l.Run(ctx) }()
		t.Cleanup(func() { stop(); <-done })
		stores = append(stores, rec.Store(name, l.Store(r)))
		ledgers = append(ledgers, l)
	}
	return stores, ledgers
}

// unwritten is how far back from now the ledgers may not hold what was
// charged: since the oldest of their last complete writes, and recordLag
// before it; 0 without ledgers, and all of the run where a ledger has not
// completed a write yet (a busy machine's first flush may come late:
// time.Since of the zero time is the largest duration, which recordLag
// would overflow to a negative one, and no loss would be allowed).
func unwritten(ledgers []*ledger.Ledger) time.Duration {
	var d time.Duration
	for _, l := range ledgers {
		written := l.Stats().Written
		if written.IsZero() {
			return math.MaxInt64
		}
		d = max(d, time.Since(written)+recordLag)
	}
	return d
}

// workload charges identities from every server at once for a while,
// re-planning at random, giving back a quarter of what it is admitted
// (refunds, settlements, a settlement then a refund) up to 300 ms later,
// from any server; at half time it runs fault, if any.
type workload struct {
	stores     []quota.Store
	identities []identity
	workers    int // a server
	duration   time.Duration
	fault      func()
	// ledgers are the servers' ledgers; at the fault, loss is set to what
	// they may not hold (see unwritten).
	ledgers []*ledger.Ledger
	loss    *time.Duration
}

// held is a receipt the workload gives back later.
type held struct {
	rc  quota.Receipt
	due time.Time
}

func (w workload) run(t *testing.T, seed uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), w.duration)
	defer cancel()
	current := make([]atomic.Int32, len(w.identities)) // each identity's plan
	var wg sync.WaitGroup
	for s := range w.stores {
		for g := range w.workers {
			rng := rand.New(rand.NewPCG(seed, uint64(s*w.workers+g)))
			wg.Go(func() { w.worker(ctx, rng, w.stores[s], current) })
		}
	}
	if w.fault != nil {
		wg.Go(func() {
			select {
			case <-ctx.Done():
			case <-time.After(w.duration / 2):
				if w.loss != nil {
					*w.loss = unwritten(w.ledgers)
				}
				w.fault()
			}
		})
	}
	wg.Wait()
}

func (w workload) worker(ctx context.Context, rng *rand.Rand, store quota.Store, current []atomic.Int32) {
	var later []held
	for ctx.Err() == nil {
		k := rng.IntN(len(w.identities))
		id := w.identities[k]
		p := int(current[k].Load())
		switch rng.IntN(20) {
		case 0: // a change of plan, seen by every server
			p = rng.IntN(len(id.plans))
			current[k].Store(int32(p))
		case 1, 2: // a server whose index of keys has not caught up
			p = rng.IntN(len(id.plans))
		}
		cctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		d, err := store.Charge(cctx, id.name, id.plans[p], 1+rng.Int64N(8))
		cancel()
		if err != nil {
			time.Sleep(5 * time.Millisecond) // Redis is down: do not spin
			continue
		}
		if d.Allowed && rng.IntN(4) == 0 {
			later = append(later, held{d.Receipt, time.Now().Add(time.Duration(rng.IntN(300)) * ms)})
		}
		later = w.giveBack(rng, later)
	}
}

// giveBack refunds or settles, from a server at random, the receipts of
// later that are due, and returns those left (and the settlements it will
// refund in turn).
func (w workload) giveBack(rng *rand.Rand, later []held) []held {
	now := time.Now()
	keep := later[:0]
	for _, h := range later {
		if now.Before(h.due) {
			keep = append(keep, h)
			continue
		}
		store := w.stores[rng.IntN(len(w.stores))]
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		if rng.IntN(2) == 0 || h.rc.Cost() == 1 {
			_, _ = store.Refund(ctx, h.rc)
		} else if rc, ok, err := store.Settle(ctx, h.rc, rng.Int64N(h.rc.Cost())); err == nil && ok && !rc.IsZero() && rng.IntN(2) == 0 {
			keep = append(keep, held{rc, now.Add(time.Duration(rng.IntN(100)) * ms)})
		}
		cancel()
	}
	return keep
}

// restart is a fault: the Redis server killed, as a crash would, and
// started again without what it held.
func restart(t *testing.T, rec *Recorder, srv *quotatest.RedisServer) func() {
	return func() {
		start := time.Now()
		srv.Stop()
		rec.Fault("restart", "", start, time.Now())
		time.Sleep(200 * ms)
		if err := srv.Start(); err != nil {
			t.Errorf("restart: %v", err)
		}
	}
}

// flushCluster is a fault: every key under prefix deleted from every
// master of the cluster, as a flush would (only this run's keys: the
// cluster may be shared).
func flushCluster(t *testing.T, rec *Recorder, c *redis.ClusterClient, prefix string) func() {
	return func() {
		ctx := context.Background()
		start := time.Now()
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			it := node.Scan(ctx, 0, prefix+"*", 100).Iterator()
			for it.Next(ctx) {
				if err := node.Del(ctx, it.Val()).Err(); err != nil {
					return err
				}
			}
			return it.Err()
		})
		rec.Fault("flush", "", start, time.Now())
		if err != nil {
			t.Errorf("flush: %v", err)
		}
	}
}

// check checks rec's history as the workload's should be judged, and
// logs the report.
func check(t *testing.T, rec *Recorder, loss time.Duration) Report {
	t.Helper()
	start := time.Now()
	t.Logf("a fault may lose what the ledgers had not written: the last %s", loss.Round(time.Millisecond))
	r := Check(rec.History(), Options{PeriodLoss: loss})
	t.Logf("%s\n(checked in %s)", r, time.Since(start).Round(time.Millisecond))
	return r
}

// requirePassed fails t unless r passed and the workload did what it
// must for that to mean something: charges admitted and denied (the
// limits bound), given back, and admitted after its one fault.
func requirePassed(t *testing.T, rec *Recorder, r Report) {
	t.Helper()
	if !r.OK() {
		t.Errorf("the history broke the model: %d over-admissions, %d miscounts, %d clock anomalies", r.Violations, r.Miscounts, r.ClockAnomalies)
	}
	if n := r.SpuriousDenials - r.SpuriousInPeriods; n > 0 {
		t.Errorf("%d denials by a sliding window of costs that fitted it", n)
	}
	h := rec.History()
	after := 0
	for _, c := range h.Charges {
		if c.Outcome == Made && len(h.Faults) > 0 && c.At.After(h.Faults[0].End) {
			after++
		}
	}
	if r.Admitted < 100 || r.Denied < 100 || r.Given < 10 || len(h.Faults) != 1 || after < 10 {
		t.Errorf("the workload proved little: %d admitted, %d denied, %d given back, %d faults, %d admitted after the fault",
			r.Admitted, r.Denied, r.Given, len(h.Faults), after)
	}
}

func testPrefix() string { return "hist:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":" }

// nodeClient dials the Redis at addr with production's options: above all
// no retries, as a charge retried by the client after a lost answer could
// be made twice and recorded once.
func nodeClient(t *testing.T, addr string) func() redis.UniversalClient {
	return func() redis.UniversalClient { return quotatest.NewClient(t, "redis://"+addr) }
}

// Three servers with usage ledgers on one redis-server, restarted at half
// time: no admitted cost that a serial order of the history would have
// refused, in any window or day, across re-plans and the restart.
func TestHistoryRedis(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	rec := NewRecorder()
	stores, ledgers := newServers(t, rec, 3, nodeClient(t, srv.Addr), testPrefix(), spatialtest.Migrated(t))
	ids := identities(t, 3*time.Second)
	var loss time.Duration
	workload{stores: stores, identities: ids, workers: 3, duration: runFor(), fault: restart(t, rec, srv), ledgers: ledgers, loss: &loss}.run(t, 1)
	requirePassed(t, rec, check(t, rec, loss))
}

// The same on a Redis Cluster of three masters, flushed at half time.
func TestHistoryCluster(t *testing.T) {
	addrs := quotatest.RedisClusterAddrs(t)
	dial := func() redis.UniversalClient { return quotatest.NewClusterClient(t, addrs) }
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { admin.Close() })
	rec := NewRecorder()
	prefix := testPrefix()
	stores, ledgers := newServers(t, rec, 3, dial, prefix, spatialtest.Migrated(t))
	var loss time.Duration
	workload{stores: stores, identities: identities(t, 3*time.Second), workers: 3, duration: runFor(), fault: flushCluster(t, rec, admin, prefix), ledgers: ledgers, loss: &loss}.run(t, 2)
	requirePassed(t, rec, check(t, rec, loss))
}

// The checker fails a store that forgets: plans without History, so a
// charge under a plan of shorter windows rebuilds the log with only those,
// and the next under the 3 s plan measures its window over what is left.
func TestHistoryWithoutPlanHistoryFails(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	rec := NewRecorder()
	stores, _ := newServers(t, rec, 3, nodeClient(t, srv.Addr), testPrefix(), nil)
	workload{stores: stores, identities: identities(t, 0), workers: 3, duration: 3 * time.Second}.run(t, 3)
	r := check(t, rec, 0)
	if r.Violations == 0 {
		t.Fatal("a store whose re-plans forget history passed the checker")
	}
	if !hasExample(r, OverWindow, "") {
		t.Errorf("no over-admission in a window shown")
	}
}

// The checker fails a store that forgets what a customer bought: a
// restart without a ledger to restore the day from counts the day again
// from zero, and the metered identity's day is spent twice.
func TestHistoryWithoutLedgerFails(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	rec := NewRecorder()
	stores, _ := newServers(t, rec, 3, nodeClient(t, srv.Addr), testPrefix(), nil)
	workload{stores: stores, identities: identities(t, 3*time.Second), workers: 3, duration: 3 * time.Second, fault: restart(t, rec, srv)}.run(t, 4)
	r := check(t, rec, 0)
	if !hasExample(r, OverPeriod, "day") {
		t.Fatal("a restart that forgot the day passed the checker")
	}
	if r.Miscounts == 0 {
		t.Error("no usage of the day reported below the model's after the restart")
	}
}

// hasExample reports whether r shows a violation of kind k of the limit
// named limit, or of any limit for "".
func hasExample(r Report, k Kind, limit string) bool {
	for _, v := range r.Examples {
		if v.Kind == k && (limit == "" || v.Limit.Name == limit) {
			return true
		}
	}
	return false
}
