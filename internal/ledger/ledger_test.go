package ledger

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/usage"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// TestMain stops the servers the tests started for the whole binary.
func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

func monthly(t *testing.T, month int64) quota.Plan {
	t.Helper()
	p, err := quota.NewPlan("monthly", quota.Limit{Name: "burst", Max: 1 << 30, Window: time.Second}, quota.PerMonth(month))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func units(t *testing.T, l *Ledger, identity string, rc quota.Receipt) int64 {
	t.Helper()
	u, err := l.PeriodUsage(context.Background(), identity, rc.Periods())
	if err != nil {
		t.Fatal(err)
	}
	return u[0]
}

// tableUnits reads the ledger's row alone, without what l holds unwritten.
func tableUnits(t *testing.T, pool *pgxpool.Pool, identity string) int64 {
	t.Helper()
	var n int64
	err := pool.QueryRow(context.Background(), `SELECT coalesce(sum(units), 0) FROM quota_ledger WHERE identity = $1`, identity).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Charges, refunds and settlements through the store add up in the
// ledger; a batch sent twice (its commit's answer lost) is applied once;
// a batch whose write failed is kept and applied by the next flush.
func TestLedgerRecordsAndFlushesOnce(t *testing.T) {
	pool := spatialtest.Migrated(t)
	l := New(pool, Options{})
	store := l.Store(quota.NewMemory(nil))
	ctx := context.Background()
	p := monthly(t, 1000)

	d1, _ := store.Charge(ctx, "key:1", p, 10)
	d2, _ := store.Charge(ctx, "key:1", p, 7)
	if ok, err := store.Refund(ctx, d1.Receipt); !ok || err != nil {
		t.Fatalf("refund: %v %v", ok, err)
	}
	if _, ok, err := store.Settle(ctx, d2.Receipt, 3); !ok || err != nil {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if got := units(t, l, "key:1", d2.Receipt); got != 3 {
		t.Errorf("before a flush, the ledger's usage with what it holds is %d, want 3", got)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tableUnits(t, pool, "key:1"); got != 3 {
		t.Errorf("after a flush, the table holds %d, want 3 (10 refunded, 7 settled to 3)", got)
	}

	// The same batch again, as a retry after a lost answer would send it.
	b := &batch{id: newID(), units: map[row]int64{{identity: "key:2", limit: "month", start: d2.Receipt.Periods()[0].Start.UnixMicro()}: 5}}
	for range 2 {
		if _, err := l.write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := tableUnits(t, pool, "key:2"); got != 5 {
		t.Errorf("a batch written twice holds %d, want 5 once", got)
	}

	// A failed write keeps its batch for the next flush.
	store.Charge(ctx, "key:3", p, 4)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Flush(dead); err == nil {
		t.Fatal("a flush with a cancelled context succeeded")
	}
	if got := tableUnits(t, pool, "key:3"); got != 0 {
		t.Fatalf("the failed write wrote %d", got)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tableUnits(t, pool, "key:3"); got != 4 {
		t.Errorf("after the retry the table holds %d, want 4", got)
	}
	if s := l.Stats(); s.Failures != 1 || s.Batches < 2 {
		t.Errorf("stats %+v, want 1 failure and at least 2 batches", s)
	}
}

// Past MaxPending rows, a new row is dropped and counted; rows already
// held still add up.
func TestLedgerBoundsWhatItHolds(t *testing.T) {
	l := New(nil, Options{MaxPending: 2})
	store := l.Store(quota.NewMemory(nil))
	p := monthly(t, 1000)
	for i := range 3 {
		store.Charge(context.Background(), fmt.Sprintf("key:%d", i), p, 1)
	}
	d, _ := store.Charge(context.Background(), "key:0", p, 1)
	if s := l.Stats(); s.Dropped != 1 {
		t.Errorf("dropped %d, want 1", s.Dropped)
	}
	l.mu.Lock()
	got := l.pending[row{identity: "key:0", limit: "month", start: d.Receipt.Periods()[0].Start.UnixMicro()}]
	l.mu.Unlock()
	if got != 2 {
		t.Errorf("a held row has %d, want 2", got)
	}
}

// The reproduction: 30 of a 50-unit month spent, written to the
// ledger, then Redis restarts without persistence. Before the ledger, the
// 30 were forgotten and 50 more served; now 20 are left.
func TestRedisRestartKeepsTheMonth(t *testing.T) {
	pool := spatialtest.Migrated(t)
	srv := quotatest.StartRedisServer(t)
	client := quotatest.NewClient(t, srv.URL())
	l := New(pool, Options{})
	store := l.Store(quota.NewRedis(client, quota.WithPeriodSource(l)))
	ctx := context.Background()
	p := monthly(t, 50)
	for range 3 {
		if d, err := store.Charge(ctx, "key:9", p, 10); err != nil || !d.Allowed {
			t.Fatalf("charge: %+v %v", d, err)
		}
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	admitted := int64(0)
	for range 10 {
		d, err := store.Charge(ctx, "key:9", p, 5)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted += 5
		}
	}
	if admitted != 20 {
		t.Errorf("after the restart %d more units were served, want 20 (30 of 50 kept)", admitted)
	}
}

// Two servers (each a store and a ledger of its own on one Redis and one
// database) charge one key's month concurrently while Redis is flushed
// twice and once restarted. The month is served past its max by at most
// what the servers held unwritten when Redis lost it; the figures are
// logged: go test ./internal/ledger -run Load -v.
func TestRedisLossUnderLoad(t *testing.T) {
	pool := spatialtest.Migrated(t)
	srv := quotatest.StartRedisServer(t)
	const month = 20_000
	p := monthly(t, month)
	type server struct {
		ledger *Ledger
		store  quota.Store
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var servers []server
	for range 2 {
		client := quotatest.NewClient(t, srv.URL())
		l := New(pool, Options{FlushEvery: 50 * time.Millisecond})
		go l.Run(ctx)
		servers = append(servers, server{l, l.Store(quota.NewRedis(client, quota.WithPeriodSource(l)))})
	}
	var admitted, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			s := servers[g%2]
			for {
				select {
				case <-stop:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, time.Second)
				d, err := s.store.Charge(cctx, "key:7", p, 3)
				ccancel()
				switch {
				case err != nil:
					failed.Add(1)
					time.Sleep(5 * time.Millisecond) // Redis is restarting
				case d.Allowed:
					admitted.Add(3)
				}
			}
		})
	}
	// held is what the servers hold unwritten: an upper bound of what a
	// loss of Redis now can cost.
	held := func() int64 {
		var n int64
		for _, s := range servers {
			s.ledger.mu.Lock()
			for _, u := range s.ledger.pending {
				n += u
			}
			if s.ledger.retry != nil {
				for _, u := range s.ledger.retry.units {
					n += u
				}
			}
			s.ledger.mu.Unlock()
		}
		return n
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	waitFor := func(units int64) {
		deadline := time.Now().Add(20 * time.Second)
		for admitted.Load() < units && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	var bound int64
	waitFor(month / 4)
	bound += held()
	admin.FlushAll(context.Background())
	waitFor(month / 2)
	bound += held()
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(3 * month / 4)
	bound += held()
	admin.FlushAll(context.Background())
	// Until the month is spent and refusals are all that is left.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		before := admitted.Load()
		time.Sleep(200 * time.Millisecond)
		if admitted.Load() == before && before >= month {
			break
		}
	}
	close(stop)
	wg.Wait()
	over := admitted.Load() - month
	t.Logf("served %d units of a %d-unit month across 2 flushes and a restart of Redis: %d over, bound %d held unwritten at the losses; %d charges failed while Redis restarted",
		admitted.Load(), int64(month), over, bound, failed.Load())
	if admitted.Load() < month {
		t.Errorf("only %d of the month's %d units served", admitted.Load(), int64(month))
	}
	if over > bound {
		t.Errorf("%d units served over the month, more than the %d the servers held unwritten", over, bound)
	}
}

// A Redis that kept a counter but lost its latest writes (a failover to a
// replica that lagged) is raised back to the ledger by the next write of
// the identity's row: 30 of 50 spent and written, the counter found at 10,
// one more charge and a flush, and 19 are left, not 39.
func TestLaggingCounterRaised(t *testing.T) {
	pool := spatialtest.Migrated(t)
	srv := quotatest.StartRedisServer(t)
	client := quotatest.NewClient(t, srv.URL())
	l := New(pool, Options{})
	r := quota.NewRedis(client, quota.WithPeriodSource(l))
	l.RaiseIn(r)
	store := l.Store(r)
	ctx := context.Background()
	p := monthly(t, 50)
	d, err := store.Charge(ctx, "key:5", p, 30)
	if err != nil || !d.Allowed {
		t.Fatalf("charge: %+v %v", d, err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The replica promoted had seen only the first 10.
	start := d.Receipt.Periods()[0].Start
	stale := make([]byte, 16)
	binary.BigEndian.PutUint64(stale, math.Float64bits(float64(start.UnixMicro())))
	binary.BigEndian.PutUint64(stale[8:], math.Float64bits(10))
	client.HSet(ctx, quota.DefaultPrefix+"{key:5}:c3", "month", string(stale))
	if d, _ := store.Charge(ctx, "key:5", p, 1); !d.Allowed {
		t.Fatal("1 unit refused")
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Raised != 1 {
		t.Errorf("raised %d counters, want 1", s.Raised)
	}
	admitted := 0
	for range 50 {
		if d, _ := store.Charge(ctx, "key:5", p, 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 19 {
		t.Errorf("%d units admitted after the raise, want the 19 left of 50", admitted)
	}
}

// The pending charge of a request served while Redis failed goes through
// the ledger's store to Redis, past the month's max, and into the ledger
// once: its retry, which Redis finds made, is not recorded again.
func TestOverdraftRecorded(t *testing.T) {
	pool := spatialtest.Migrated(t)
	srv := quotatest.StartRedisServer(t)
	client := quotatest.NewClient(t, srv.URL())
	l := New(pool, Options{})
	store, ok := l.Store(quota.NewRedis(client, quota.WithPeriodSource(l))).(interface {
		ChargeOverdraft(ctx context.Context, identity string, plan quota.Plan, cost int64, id string) (quota.Decision, bool, error)
	})
	if !ok {
		t.Fatal("the ledger's store makes no overdraft charges")
	}
	ctx := context.Background()
	p := monthly(t, 50)
	for _, id := range []string{"pending-1", "pending-2"} {
		if _, made, err := store.ChargeOverdraft(ctx, "key:7", p, 40, id); err != nil || !made {
			t.Fatalf("%s: made %v, %v", id, made, err)
		}
	}
	if _, made, err := store.ChargeOverdraft(ctx, "key:7", p, 40, "pending-1"); err != nil || made {
		t.Fatalf("a retry: made %v, %v; want not made", made, err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if u := tableUnits(t, pool, "key:7"); u != 80 {
		t.Errorf("the ledger holds %d units, want 80: two overdrafts of 40, past the month's 50, the retry not again", u)
	}
}

// A charge under a plan with a shared identity (a key's customer) is
// recorded in every part: the customer's month adds up in the ledger from
// all its keys, refunds and settlements given back in both.
func TestSharedPartsRecorded(t *testing.T) {
	pool := spatialtest.Migrated(t)
	l := New(pool, Options{})
	store := l.Store(quota.NewMemory(nil))
	ctx := context.Background()
	customer, err := quota.NewPlan("team", quota.Limit{Name: "customer.burst", Max: 1 << 30, Window: time.Second}, quota.Limit{Name: "customer.month", Max: 1000, Period: quota.Month})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("customer:%d", time.Now().UnixNano())
	p := monthly(t, 1000)
	p.Shared = []quota.Shared{{Identity: id, Plan: customer}}
	a, b := quota.Member(id, "key:1"), quota.Member(id, "key:2")
	d1, err := store.Charge(ctx, a, p, 10)
	if err != nil || !d1.Allowed {
		t.Fatalf("charge: %+v %v", d1, err)
	}
	d2, err := store.Charge(ctx, b, p, 7)
	if err != nil || !d2.Allowed {
		t.Fatalf("charge: %+v %v", d2, err)
	}
	if _, ok, err := store.Settle(ctx, d2.Receipt, 3); !ok || err != nil {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for who, want := range map[string]int64{a: 10, b: 3, id: 13} {
		if got := tableUnits(t, pool, who); got != want {
			t.Errorf("the ledger holds %d units of %s, want %d", got, who, want)
		}
	}
	if ok, err := store.Refund(ctx, d1.Receipt); !ok || err != nil {
		t.Fatalf("refund: %v %v", ok, err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for who, want := range map[string]int64{a: 0, b: 3, id: 3} {
		if got := tableUnits(t, pool, who); got != want {
			t.Errorf("after a refund the ledger holds %d units of %s, want %d", got, who, want)
		}
	}
}

// A customer's month survives a Redis restart as a key's does: 30 of its
// 50 units spent by two of its keys, written to the ledger, then Redis
// restarts without persistence; 20 are left, whichever key asks.
func TestRedisRestartKeepsTheCustomersMonth(t *testing.T) {
	pool := spatialtest.Migrated(t)
	srv := quotatest.StartRedisServer(t)
	client := quotatest.NewClient(t, srv.URL())
	l := New(pool, Options{})
	store := l.Store(quota.NewRedis(client, quota.WithPeriodSource(l)))
	ctx := context.Background()
	customer, err := quota.NewPlan("team", quota.Limit{Name: "customer.burst", Max: 1 << 30, Window: time.Second}, quota.Limit{Name: "customer.month", Max: 50, Period: quota.Month})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("customer:%d", time.Now().UnixNano())
	p := monthly(t, 1000)
	p.Shared = []quota.Shared{{Identity: id, Plan: customer}}
	members := []string{quota.Member(id, "key:1"), quota.Member(id, "key:2")}
	for i := range 3 {
		if d, err := store.Charge(ctx, members[i%2], p, 10); err != nil || !d.Allowed {
			t.Fatalf("charge: %+v %v", d, err)
		}
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	admitted := int64(0)
	for i := range 10 {
		d, err := store.Charge(ctx, members[i%2], p, 5)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted += 5
		}
	}
	if admitted != 20 {
		t.Errorf("after the restart %d more units were served, want 20 (30 of the customer's 50 kept)", admitted)
	}
}

// The usage history goes with the batch: a batch sent again after its
// commit's answer was lost writes its usage once, and one whose write
// failed writes it at the next flush.
func TestUsageWrittenOnce(t *testing.T) {
	pool := spatialtest.Migrated(t)
	l := New(pool, Options{})
	ctx := context.Background()
	hour := usage.Hour(time.Now())
	row := usage.Row{Identity: "key:1", KeyID: 1, Start: hour, Route: "tiles", Layer: "roads", Requests: 1, Charged: 10}
	l.AddUsage(row)
	l.AddUsage(usage.Row{Identity: "key:1", KeyID: 1, Start: hour, Route: "tiles", Layer: "roads", Requests: 1, Charged: 10, GivenBack: 9})
	requests := func() (n, settled int64) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT coalesce(sum(requests), 0), coalesce(sum(units_charged - units_given_back), 0) FROM usage_hourly`).Scan(&n, &settled)
		if err != nil {
			t.Fatal(err)
		}
		return n, settled
	}
	b, _ := l.next()
	for range 2 { // the retry after a lost answer
		if _, err := l.write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if n, u := requests(); n != 2 || u != 11 {
		t.Errorf("a batch written twice holds %d requests and %d units, want 2 and 11 once", n, u)
	}

	l.AddUsage(row)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Flush(dead); err == nil {
		t.Fatal("a flush with a cancelled context succeeded")
	}
	if n, _ := requests(); n != 2 {
		t.Fatalf("the failed write wrote: %d requests", n)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var keyID int64
	var customer *int64
	if err := pool.QueryRow(ctx, `SELECT key_id, customer_id FROM usage_hourly`).Scan(&keyID, &customer); err != nil {
		t.Fatal(err)
	}
	if n, u := requests(); n != 3 || u != 21 || keyID != 1 || customer != nil {
		t.Errorf("after the retry: %d requests, %d units, key %d, customer %v; want 3, 21, 1, NULL", n, u, keyID, customer)
	}
}

// A flush writes what was recorded before it began, in one batch, however
// busy the recorders are meanwhile: under load, the writes stay one a
// FlushEvery rather than a batch after another of a few rows each.
func TestFlushWritesOneBatchUnderLoad(t *testing.T) {
	pool := spatialtest.Migrated(t)
	l := New(pool, Options{})
	hour := usage.Hour(time.Now())
	l.AddUsage(usage.Row{Identity: "key:1", KeyID: 1, Start: hour, Route: "tiles", Layer: "roads", Requests: 1, Charged: 10})
	done := make(chan struct{})
	recorded := make(chan int64)
	go func() {
		var n int64
		defer func() { recorded <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			l.AddUsage(usage.Row{Identity: "key:2", KeyID: 2, Start: hour, Route: "tiles", Layer: "roads", Requests: 1, Charged: 1})
			n++
			if n%64 == 0 {
				time.Sleep(time.Millisecond) // let the flush's writes interleave
			}
		}
	}()
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(done)
	n := <-recorded
	if s := l.Stats(); s.Batches != 1 {
		t.Errorf("one flush with recorders busy wrote %d batches, want 1", s.Batches)
	}
	// What was recorded meanwhile is written by the next flush.
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var requests int64
	if err := pool.QueryRow(context.Background(), `SELECT sum(requests) FROM usage_hourly`).Scan(&requests); err != nil {
		t.Fatal(err)
	}
	if requests != n+1 {
		t.Errorf("%d requests written, want %d", requests, n+1)
	}
}
