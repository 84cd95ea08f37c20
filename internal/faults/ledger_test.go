package faults

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tileapi/tileapi/loadtest"
)

// The restart with the ledger: each key has a month of monthMax units,
// and the servers write every charge of it to the usage ledger in
// PostgreSQL every ledgerFlush. Redis is restarted without persistence once
// each key has spent half its month, and the load goes on until the month
// is spent.
const (
	monthMax    = 2000
	ledgerFlush = 200 * time.Millisecond // TILEAPI_LEDGER_FLUSH
	// spendWait is the most each half of the month may take to spend.
	spendWait = 15 * time.Second
	// spent is how long no key's charges may grow before the month is
	// taken to be spent.
	spent = 4 * ledgerFlush
)

// exhausted is the answer to a request its key's month has no room for.
const exhausted = "429 quota-exhausted"

// runLedgerRestart restarts Redis under load, failing closed (every
// request served was charged in Redis, nothing owed), and checks that what
// the month had counted survives it: at most one flush interval of each
// key's charges on every server is lost, the month is served past its max
// by no more than that, and nothing but charges, a spent month and the
// restart's 503s is answered.
func runLedgerRestart(t *testing.T, db string) {
	f := fault{
		// A plan needs a sliding window beside its periods: faultPlan's.
		limits: append([]loadtest.Limit{{Name: "month", Period: "month", Max: monthMax}}, faultPlan.Limits...),
		env:    []string{"TILEAPI_LEDGER_FLUSH=" + ledgerFlush.String()},
	}
	r := newRig(t, db, true, f)
	hc := newHTTPClient(r.clients)
	stop := drive(t, hc, r)

	half := func() bool {
		for i := range r.keys {
			if r.charged[i].Load() < monthMax/2 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(spendWait); !half(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the keys did not spend half their month of %d in %v", monthMax, spendWait)
		}
	}
	held := time.Now()
	r.hold(t)
	before, ledger := r.usage(t), r.ledger(t)
	r.redis.Stop()
	if err := r.redis.Start(); err != nil {
		t.Fatal(err)
	}
	r.rproxy.Restore()

	// The rest of the month: until no key is charged any more.
	total := func() (n int64) {
		for i := range r.keys {
			n += r.charged[i].Load()
		}
		return n
	}
	last, since := total(), time.Now()
	for deadline := time.Now().Add(spendWait); time.Since(since) < spent; time.Sleep(10 * time.Millisecond) {
		if n := total(); n != last {
			last, since = n, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the keys were still charged %v after the restart: is the month limit kept?", spendWait)
		}
	}
	rs := stop()
	after := r.usage(t)

	// What a key was charged in the last flush interval before Redis was
	// held, on every server: what the ledger may not have had yet.
	served, recent, late, refused := map[int64]int64{}, map[int64]int64{}, map[int64]int64{}, map[int64]int{}
	other := map[string]int{}
	for _, res := range rs {
		id := r.keys[res.key].id
		switch o := res.outcome(); o {
		case charged:
			served[id] += res.cost
			if res.start.Before(held) && res.end.After(held.Add(-ledgerFlush)) {
				recent[id] += res.cost
			}
		case exhausted:
			refused[id]++
		case "503 quota-unavailable": // the restart, failing closed
			late[id] += int64(b2i(res.late(true)))
		default:
			if res.slowQuery() { // a query out of time, its charge given back: right at any time, as in the other cases
				continue
			}
			other[o]++
		}
	}
	for _, o := range slices.Sorted(maps.Keys(other)) {
		t.Errorf("%d responses %s (allowed: %s, %s, 503 quota-unavailable, a 504 query-timeout given back after the query timeout)", other[o], o, charged, exhausted)
	}
	for _, k := range r.keys {
		// The quota holds every charge made after the restart, and of
		// those before it what it kept.
		kept := after[k.id] - (served[k.id] - before[k.id])
		lost, over, bound := before[k.id]-kept, served[k.id]-monthMax, recent[k.id]
		t.Logf("key %d: %d units charged before the restart, %d of them in the ledger then; %d kept after it (%d lost; at most %d, what it was charged in the %v before); %d served on a month of %d",
			k.id, before[k.id], ledger[k.id], kept, lost, bound, ledgerFlush, served[k.id], monthMax)
		if lost > bound {
			t.Errorf("key %d: %d of the %d units its month had counted were lost over the restart, more than the %d it was charged in the last flush interval (%v)",
				k.id, lost, before[k.id], bound, ledgerFlush)
		}
		// Nothing is counted twice (a counter restored by two servers, or
		// raised past what the ledger holds): the quota holds no more than
		// what was served, and a request's price for each refused because
		// its charge was answered late.
		if extra := after[k.id] - served[k.id]; extra > maxPrice*late[k.id] {
			t.Errorf("key %d: the month holds %d units, %d more than its responses served as charged cost, and %d more were refused late: counted twice",
				k.id, after[k.id], extra, late[k.id])
		}
		if over > bound {
			t.Errorf("key %d: %d units served on a month of %d, %d past its max, more than the %d it was charged in the last flush interval (%v)",
				k.id, served[k.id], monthMax, over, bound, ledgerFlush)
		}
		// The case tells a lost month from the bound only if the month had
		// counted well more than a flush interval's charges, and only if
		// the month was spent.
		if before[k.id] < 2*bound {
			t.Errorf("key %d: charged %d units before the restart, %d of them in the last %v: too fast a load for this case to tell a lost month (raise monthMax)",
				k.id, before[k.id], bound, ledgerFlush)
		}
		if refused[k.id] == 0 {
			t.Errorf("key %d: no request was refused %s: its month of %d was not spent (%d served)", k.id, exhausted, monthMax, served[k.id])
		}
	}
}
