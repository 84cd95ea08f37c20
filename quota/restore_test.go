package quota

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// bookSource is a PeriodSource kept in the test: the units each identity
// used in each period, as a ledger would hold them once flushed.
type bookSource struct {
	mu    sync.Mutex
	units map[string]int64 // identity + limit + start
	calls atomic.Int64
	err   error
}

func (b *bookSource) PeriodUsage(_ context.Context, identity string, ps []PeriodKey) ([]int64, error) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = b.units[identity+"|"+p.Limit+"|"+p.Start.UTC().Format(time.RFC3339)]
	}
	return out, nil
}

func (b *bookSource) set(identity, limit string, start time.Time, units int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.units == nil {
		b.units = map[string]int64{}
	}
	b.units[identity+"|"+limit+"|"+start.UTC().Format(time.RFC3339)] = units
}

// restoreFixtures returns a Redis store and a cluster store with src as
// their PeriodSource, and a function that makes each lose every counter
// of an identity, as a restart without persistence does.
func restoreFixtures(t *testing.T, src PeriodSource) []struct {
	name  string
	store *Redis
	lose  func(identity string)
} {
	rc, cc := redisClient(t), clusterClient(t)
	var opts []RedisOption
	if src != nil {
		opts = append(opts, WithPeriodSource(src))
	}
	rs := NewRedis(rc, append(opts, WithPrefix(testPrefix(t)))...)
	cs := NewRedis(cc, append(opts, WithPrefix(testPrefix(t)))...)
	return []struct {
		name  string
		store *Redis
		lose  func(identity string)
	}{
		{"redis", rs, func(id string) { rc.Del(context.Background(), rs.countersKey(id)) }},
		{"cluster", cs, func(id string) { cc.Del(context.Background(), cs.countersKey(id)) }},
	}
}

// A month of 50 units, 30 spent, then Redis loses the counters: with the
// ledger's 30 restored, 20 more fit, not 50.
func TestRestoreLostCounters(t *testing.T) {
	src := &bookSource{}
	p := mustPlan(t, "monthly", PerSecond(1000), PerMonth(50))
	for _, fx := range restoreFixtures(t, src) {
		t.Run(fx.name, func(t *testing.T) {
			id := "k-" + fx.name
			d := charge(t, fx.store, id, p, 30)
			if !d.Allowed {
				t.Fatal("the first 30 were refused")
			}
			if calls := src.calls.Load(); calls == 0 {
				t.Error("a new identity's month was not looked up")
			}
			marks := d.Receipt.Periods()
			if len(marks) != 1 || marks[0].Limit != "month" {
				t.Fatalf("receipt periods %v, want the month", marks)
			}
			src.set(id, "month", marks[0].Start, 30)
			fx.lose(id)
			before := src.calls.Load()
			if d := peek(t, fx.store, id, p); d.Limits[1].Used != 30 {
				t.Errorf("after the loss, a peek sees %d used, want 30 restored", d.Limits[1].Used)
			}
			if d := charge(t, fx.store, id, p, 21); d.Allowed {
				t.Error("21 admitted where 20 are left")
			}
			if d := charge(t, fx.store, id, p, 20); !d.Allowed {
				t.Errorf("20 refused where 20 are left (used %v)", used(d))
			}
			if n := src.calls.Load() - before; n != 1 {
				t.Errorf("the source was asked %d times after the loss, want once: the restored counter is kept", n)
			}
		})
	}
}

// Many callers on several "servers" (stores sharing the Redis) find the
// counter lost at once: each may look it up, one restore is kept, and
// together they admit exactly what is left of the month.
func TestRestoreOnceUnderConcurrency(t *testing.T) {
	src := &bookSource{}
	p := mustPlan(t, "monthly", PerSecond(100_000), PerMonth(500))
	rc := redisClient(t)
	prefix := testPrefix(t)
	servers := []*Redis{
		NewRedis(rc, WithPrefix(prefix), WithPeriodSource(src)),
		NewRedis(redisClient(t), WithPrefix(prefix), WithPeriodSource(src)),
	}
	d := charge(t, servers[0], "k", p, 200)
	src.set("k", "month", d.Receipt.Periods()[0].Start, 200)
	rc.Del(context.Background(), servers[0].countersKey("k"))

	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				d, err := servers[g%2].Charge(context.Background(), "k", p, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 300 {
		t.Errorf("%d admitted after the loss, want exactly the 300 left of 500", got)
	}
}

// A source that fails fails the charge, which charges nothing.
func TestRestoreFailureChargesNothing(t *testing.T) {
	src := &bookSource{err: errors.New("database down")}
	p := mustPlan(t, "monthly", PerSecond(1000), PerMonth(50))
	for _, fx := range restoreFixtures(t, src) {
		t.Run(fx.name, func(t *testing.T) {
			if _, err := fx.store.Charge(context.Background(), "k", p, 5); err == nil || !errors.Is(err, src.err) {
				t.Fatalf("charge with a failing source: %v, want its error", err)
			}
			src.mu.Lock()
			src.err = nil
			src.mu.Unlock()
			if d := charge(t, fx.store, "k", p, 50); !d.Allowed {
				t.Errorf("the whole month refused after a failed charge: it was counted (used %v)", used(d))
			}
			src.mu.Lock()
			src.err = errors.New("database down")
			src.mu.Unlock()
		})
	}
}

// RaisePeriods brings counters that are behind up to what the durable copy
// holds, restores a missing one (with a TTL), lowers none, and leaves one
// that has moved on to a later period.
func TestRaisePeriods(t *testing.T) {
	p := mustPlan(t, "monthly", PerSecond(1000), PerMonth(100), PerDay(50))
	for _, fx := range restoreFixtures(t, nil) {
		t.Run(fx.name, func(t *testing.T) {
			ctx := context.Background()
			d := charge(t, fx.store, "a", p, 10)
			ps := d.Receipt.Periods() // month, day
			later := PeriodKey{Limit: "day", Start: ps[1].Start.Add(-24 * time.Hour)}
			n, err := fx.store.RaisePeriods(ctx, map[string][]PeriodUnits{
				"a": {{PeriodKey: ps[0], Units: 30}, {PeriodKey: later, Units: 40}}, // behind; an earlier day
				"b": {{PeriodKey: ps[0], Units: 20}},                                // missing
			})
			if err != nil || n != 2 {
				t.Fatalf("raised %d, %v; want 2 (a's month, b's month)", n, err)
			}
			if n, _ := fx.store.RaisePeriods(ctx, map[string][]PeriodUnits{"a": {{PeriodKey: ps[0], Units: 5}}}); n != 0 {
				t.Errorf("a counter above the copy was lowered")
			}
			d = peek(t, fx.store, "a", p)
			if used(d)[1] != 30 || used(d)[2] != 10 {
				t.Errorf("a's month and day after the raise: %v, want 30 and 10 (the day is later than the copy's)", used(d))
			}
			if d := peek(t, fx.store, "b", p); used(d)[1] != 20 {
				t.Errorf("b's month restored to %d, want 20", used(d)[1])
			}
		})
	}
}

// The raise goes by EVALSHA in one pipeline; on a server that has not
// seen the script (new, or restarted) it is loaded and the raise made.
func TestRaisePeriodsLoadsTheScript(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	s := NewRedis(c)
	ctx := context.Background()
	p := mustPlan(t, "monthly", PerSecond(1000), PerMonth(100))
	start, _ := Month.Bounds(time.Now(), time.UTC)
	month := PeriodKey{Limit: "month", Start: start}
	for i, units := range []int64{20, 30} {
		if i == 1 {
			srv.Stop() // a restart forgets the scripts and, here, the counters
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
		}
		n, err := s.RaisePeriods(ctx, map[string][]PeriodUnits{"a": {{PeriodKey: month, Units: units}}})
		if err != nil || n != 1 {
			t.Fatalf("raise %d on a server without the script: %d raised, %v", i, n, err)
		}
		if got := used(peek(t, s, "a", p))[1]; got != units {
			t.Errorf("raise %d: the month is %d, want %d", i, got, units)
		}
	}
}
