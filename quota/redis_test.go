package quota

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/internal/redislayout"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/redisbatch"
)

// redisTargets are the two deployments the Redis store must hold a limit on.
var redisTargets = []struct {
	name    string
	clients func(t *testing.T, n int) []redis.UniversalClient
}{
	{"redis", func(t *testing.T, n int) []redis.UniversalClient {
		cs := make([]redis.UniversalClient, n)
		for i := range cs {
			cs[i] = redisClient(t)
		}
		return cs
	}},
	{"cluster", func(t *testing.T, n int) []redis.UniversalClient {
		cs := make([]redis.UniversalClient, n)
		for i := range cs {
			cs[i] = clusterClient(t)
		}
		return cs
	}},
	// The same with the calls of each client batched (redisbatch): the
	// semantics must be those of one call at a time.
	{"redis-batched", func(t *testing.T, n int) []redis.UniversalClient {
		cs := make([]redis.UniversalClient, n)
		for i := range cs {
			c := redisClient(t)
			redisbatch.Enable(c)
			cs[i] = c
		}
		return cs
	}},
	{"cluster-batched", func(t *testing.T, n int) []redis.UniversalClient {
		cs := make([]redis.UniversalClient, n)
		for i := range cs {
			c := clusterClient(t)
			redisbatch.Enable(c)
			cs[i] = c
		}
		return cs
	}},
}

type admit struct{ at, cost int64 }

// Hundreds of goroutines through several separate clients (as several app
// servers would) charge one identity with mixed costs, on Redis's own clock.
// Every trailing window of every limit must hold at most its max, and the
// limits must actually be reached.
func TestConcurrentExactness(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			prefix := testPrefix(t)
			clients := target.clients(t, 4)
			plan := mustPlan(t, "concurrent",
				Limit{Name: "burst", Max: 60, Window: 200 * time.Millisecond},
				Limit{Name: "second", Max: 200, Window: time.Second})
			// Long enough for the longest window to fill, bounded in time.
			const goroutines, maxCost, runFor = 200, 7, 1500 * time.Millisecond
			deadline := time.Now().Add(runFor)

			var mu sync.Mutex
			var admits []admit
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := NewRedis(clients[g%len(clients)], WithPrefix(prefix))
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for time.Now().Before(deadline) {
						cost := 1 + rng.Int64N(maxCost)
						d, err := s.Charge(context.Background(), "shared", plan, cost)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admits = append(admits, admit{d.Receipt.at, cost})
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			slices.SortFunc(admits, func(a, b admit) int { return int(a.at - b.at) })
			for _, l := range plan.Limits {
				peak := peakWindowSum(admits, l.Window.Microseconds())
				t.Logf("%s: %d admits, peak sum in any %v window = %d (max %d)", l.Name, len(admits), l.Window, peak, l.Max)
				if peak > l.Max {
					t.Errorf("limit %s: a trailing window admitted %d > max %d", l.Name, peak, l.Max)
				}
				// Demand far exceeds supply, so some window must be full, up
				// to what one largest cost that no longer fits can leave.
				if peak < l.Max-(maxCost-1) {
					t.Errorf("limit %s: peak window sum %d: under-admission below %d", l.Name, peak, l.Max-(maxCost-1))
				}
			}
		})
	}
}

// peakWindowSum returns the largest total cost admitted in any window of w
// microseconds: the largest is always one that ends at an admit.
func peakWindowSum(admits []admit, w int64) int64 {
	var peak, sum int64
	lo := 0
	for _, a := range admits {
		sum += a.cost
		for admits[lo].at <= a.at-w {
			sum -= admits[lo].cost
			lo++
		}
		peak = max(peak, sum)
	}
	return peak
}

// A Redis restart must not fail a single call after it: the script cache
// is empty then, and EVALSHA falls back to EVAL on NOSCRIPT.
func TestRedisRestart(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	s := NewRedis(quotatest.NewClient(t, srv.URL()), WithPrefix(testPrefix(t)))
	p := mustPlan(t, "restart", PerMinute(10))
	charge(t, s, "r", p, 3)
	srv.Stop()
	if _, err := s.Charge(ctx, "r", p, 1); err == nil {
		t.Fatal("charge with Redis down succeeded")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted server kept nothing (no persistence), so the log starts
	// again; the point is that the very first call succeeds.
	d, err := s.Charge(ctx, "r", p, 1)
	if err != nil || !d.Allowed || d.Limits[0].Used != 1 {
		t.Fatalf("first charge after restart: %+v, %v", d, err)
	}
}

// A charge that reaches Redis after its caller gave up is not made: here
// Redis hangs (SIGSTOP) with the charge sent, the caller's deadline passes,
// and when Redis resumes and runs the script, it finds the deadline gone.
// Without the deadline it would charge a request nobody served. The same
// holds with the client's calls batched.
func TestLateChargeIsNotMade(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run("batched="+strconv.FormatBool(batched), func(t *testing.T) { testLateCharge(t, batched) })
	}
}

func testLateCharge(t *testing.T, batched bool) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	if batched {
		redisbatch.Enable(c)
	}
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	p := mustPlan(t, "late", PerMinute(10))
	charge(t, s, "x", p, 3) // also measures Redis's clock

	srv.Hang(t)
	late, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := s.Charge(late, "x", p, 2)
	if err == nil {
		t.Fatal("a charge to a hung Redis succeeded")
	}
	<-late.Done() // past the deadline, then Redis runs it
	cancel()
	srv.Resume()
	var d Decision
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if d, err = s.Peek(ctx, "x", p); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if used := d.Limits[0].Used; used != 3 {
		t.Errorf("used %d after the late charge ran, want 3: it was made after its caller gave up", used)
	}
	// With time to spare, a charge is made as ever.
	if d := charge(t, s, "x", p, 2); d.Limits[0].Used != 5 {
		t.Errorf("a charge in time: used %d, want 5", d.Limits[0].Used)
	}
}

// A charge that Redis runs after the halfway mark of its caller's time,
// but answers in time, is refused with ErrLate, matched by errors.Is, and
// not made. Redis hangs past the halfway mark of a 4 s deadline (at 2 s)
// and resumes at 2.5 s, leaving 1.5 s for the reply.
func TestLateChargeAnswersErrLate(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	p := mustPlan(t, "late", PerMinute(10))
	charge(t, s, "x", p, 3) // also measures Redis's clock

	srv.Hang(t)
	errc := make(chan error, 1)
	go func() {
		late, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		_, err := s.Charge(late, "x", p, 2)
		errc <- err
	}()
	time.Sleep(2500 * time.Millisecond)
	srv.Resume()
	if err := <-errc; !errors.Is(err, ErrLate) {
		t.Fatalf("a charge run after the halfway mark: err = %v, want ErrLate", err)
	}
	if d := peek(t, s, "x", p); d.Limits[0].Used != 3 {
		t.Errorf("used %d after ErrLate, want 3: the late charge was made", d.Limits[0].Used)
	}
}

// holdScripts is a client hook that, once armed, stops the next script
// call on its way out, after the store has built its arguments and before
// it is sent, until released.
type holdScripts struct {
	armed   atomic.Bool
	held    chan time.Time // when the call was stopped, by this process's clock
	release chan struct{}
}

func (h *holdScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "fcall" || name == "evalsha" || name == "eval") && h.armed.CompareAndSwap(true, false) {
			h.held <- time.Now()
			<-h.release
		}
		return next(ctx, cmd)
	}
}

func (h *holdScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A charge is timed by Redis's TIME when the script runs, not by the
// caller's clock: here the call is held on its way out, after the store
// built it, until Redis's clock has passed the moment it was held; the
// receipt's At and the log's record are then no earlier than Redis's
// time at the release, and no later than its time after the reply.
// Anything the caller's clock read was earlier than both.
func TestChargeTakesRedisTime(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t) // on this machine: its clock and the caller's agree
	c := quotatest.NewClient(t, "redis://"+srv.Addr)
	hold := &holdScripts{held: make(chan time.Time, 1), release: make(chan struct{})}
	c.AddHook(hold)
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	p := mustPlan(t, "time", PerMinute(10))
	charge(t, s, "t", p, 1) // loads the library: the held call is an FCALL that runs

	redisTime := func() time.Time {
		t.Helper()
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	hold.armed.Store(true)
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := s.Charge(ctx, "t", p, 2)
		done <- result{d, err}
	}()
	heldAt := <-hold.held
	var released time.Time
	for deadline := time.Now().Add(5 * time.Second); ; {
		if released = redisTime(); released.Sub(heldAt) > time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis's clock reads %v, still not past %v when the call was held", released, heldAt)
		}
	}
	close(hold.release)
	res := <-done
	after := redisTime()
	if res.err != nil || !res.d.Allowed {
		t.Fatalf("charge: %+v, %v", res.d, res.err)
	}
	if at := res.d.Receipt.At(); at.Before(released.Truncate(time.Microsecond)) || at.After(after) {
		t.Errorf("receipt at %v: want Redis's time when the script ran, in [%v, %v]; the call was built before %v",
			at, released, after, heldAt)
	}
	rs, err := s.Records(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[1].Cost != 2 || !rs[1].At.Equal(res.d.Receipt.At()) {
		t.Errorf("records %+v: want the second at %v, the receipt's time", rs, res.d.Receipt.At())
	}
}

// A FUNCTION FLUSH and a SCRIPT FLUSH (as on a server that lost them) must
// not fail a single call: an FCALL that finds the library missing loads it
// and calls again.
func TestNoScriptRecovery(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			ctx := context.Background()
			c := target.clients(t, 1)[0]
			s := NewRedis(c, WithPrefix(testPrefix(t)))
			p := mustPlan(t, "noscript", PerMinute(10))
			flush := func(ctx context.Context, c *redis.Client) error {
				if err := c.FunctionFlush(ctx).Err(); err != nil {
					return err
				}
				return c.ScriptFlush(ctx).Err()
			}
			flushAll := func() error {
				if cc, ok := c.(*redis.ClusterClient); ok {
					return cc.ForEachShard(ctx, flush)
				}
				return flush(ctx, c.(*redis.Client))
			}
			for i := range 3 {
				if err := flushAll(); err != nil {
					t.Fatal(err)
				}
				d, err := s.Charge(ctx, "n", p, 1)
				if err != nil || !d.Allowed || d.Limits[0].Used != int64(i+1) {
					t.Fatalf("charge %d after the flush: %+v, %v", i, d, err)
				}
				if err := flushAll(); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Refund(ctx, d.Receipt); err != nil {
					t.Fatalf("refund after the flush: %v", err)
				}
				charge(t, s, "n", p, 1)
			}
		})
	}
}

// The log expires one to one and a quarter longest windows after the last
// admit, by Redis's clock, and not before; a peek or a denial never
// creates it or leaves it without a TTL, and idle identities vanish. The test polls for each state
// with a deadline: the windows are Redis's, on its own clock.
func TestKeysExpire(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	const short, long = 300 * time.Millisecond, time.Second
	p := mustPlan(t, "ttl", Limit{Name: "short", Max: 2, Window: short}, Limit{Name: "long", Max: 5, Window: long})
	checkTTL := func(key, when string, max time.Duration) {
		t.Helper()
		if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > max {
			t.Errorf("%s: PTTL %s = %v, want in (0, %v]", when, key, ttl, max)
		}
	}
	redisNow := func() time.Time {
		t.Helper()
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}

	key := s.key("e")
	peek(t, s, "e", p)
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("a peek at an idle identity created the log")
	}
	admit := charge(t, s, "e", p, 2)
	charge(t, s, "e", p, 1) // denied by the short limit
	checkTTL(key, "after an admit and a denial", long*5/4)
	for deadline := time.Now().Add(long + 10*time.Second); c.Exists(ctx, key).Val() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log of an idle identity remains 10 s after its window of %v", long)
		}
	}
	// PEXPIRE counts whole milliseconds, Receipt.At microseconds.
	if gone, due := redisNow(), admit.Receipt.At().Add(long-time.Millisecond); gone.Before(due) {
		t.Errorf("the log was gone at %v, before one window (%v) after the last admit at %v", gone, long, admit.Receipt.At())
	}

	// A peek after the short window has emptied, which rewrites the header,
	// keeps the TTL; so does a re-plan, which rewrites the whole log. The
	// long window is a minute here, so that however slow the machine the
	// charge is still in it.
	key = s.key("f")
	p = mustPlan(t, "ttl", Limit{Name: "short", Max: 2, Window: short}, Limit{Name: "long", Max: 5, Window: time.Minute})
	admit = charge(t, s, "f", p, 2)
	for deadline := time.Now().Add(10 * time.Second); !redisNow().After(admit.Receipt.At().Add(short)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Redis's clock has not passed %v, a short window after the admit, in 10 s", admit.Receipt.At().Add(short))
		}
	}
	if u := used(peek(t, s, "f", p)); !slices.Equal(u, []int64{0, 2}) {
		t.Errorf("a short window after the admit: used %v, want [0 2]", u)
	}
	checkTTL(key, "after a peek", time.Minute*5/4)
	peek(t, s, "f", mustPlan(t, "other", PerMinute(9)))
	checkTTL(key, "after a re-plan", time.Minute*5/4)
}

// A log's TTL is set again only once less than a longest window is left
// of it, not at every charge, and yet never ends within a window of an
// admit: on a server of its own, charges every 20 ms for 1.5 windows of
// 1 s, each followed by its log's PTTL, make a handful of PEXPIRE.
func TestExpiryRefreshedEveryQuarterWindow(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	const window = time.Second
	p := mustPlan(t, "ttl", Limit{Name: "w", Max: 1 << 20, Window: window})
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	charges := 0
	for start := time.Now(); time.Since(start) < window*3/2; time.Sleep(20 * time.Millisecond) {
		before := time.Now()
		charge(t, s, "q", p, 1)
		charges++
		ttl := c.PTTL(ctx, s.key("q")).Val()
		if ends := time.Now().Add(ttl); ends.Before(before.Add(window-2*time.Millisecond)) || ttl > window*5/4 {
			t.Fatalf("charge %d: PTTL %v: the log would end %v after the charge began, want one window to 1.25", charges, ttl, ends.Sub(before))
		}
	}
	got := calls(t, c, "pexpire", "set")
	// The first charge sets the TTL with the log (SET PX); each refresh
	// after a quarter window is a PEXPIRE, or a SET PX when the log is
	// rewritten.
	if refreshes := got["pexpire"] + got["set"]; refreshes < 2 || refreshes > 12 || refreshes > charges/3 {
		t.Errorf("%d charges over 1.5 windows set the TTL %d times (%v), want every quarter window or so", charges, refreshes, got)
	}
}

// An identity's log is in its hash tag's cluster slot whatever bytes the
// identity holds, so keys added beside it share the slot: the tag is the
// escaped identity, which braces in it cannot steer, and identities spread
// over slots. A member identity's keys are in its group's slot.
func TestClusterHashTag(t *testing.T) {
	ctx := context.Background()
	c := clusterClient(t)
	s := NewRedis(c, WithPrefix("tileapi:q:"))
	slots := map[int64]bool{}
	for _, id := range []string{"plain", "{x", "a}b{c", "}", "{", "{a b}c", "with space", "\x00\xff", "k:{user1}", "ab", "ba", "abc"} {
		key := s.key(id)
		slot := c.ClusterKeySlot(ctx, key).Val()
		if tagged := c.ClusterKeySlot(ctx, "other{"+redislayout.EscapeIdentity(id)+"}").Val(); tagged != slot {
			t.Errorf("%q: key %q is in slot %d, not its tag's slot %d", id, key, slot, tagged)
		}
		slots[slot] = true
		for _, member := range []string{"", "key:1", "{x}", "a b"} {
			if m := Member(id, member); c.ClusterKeySlot(ctx, s.key(m)).Val() != slot || c.ClusterKeySlot(ctx, s.countersKey(m)).Val() != slot {
				t.Errorf("%q: the keys of its member %q are not in its slot", id, m)
			}
		}
	}
	if len(slots) < 3 {
		t.Errorf("12 identities landed in only %d slots: the hash tag is not the identity", len(slots))
	}
}

// The log reads back (redislayout.Read) every admitted charge with the index
// its receipt holds, at every record width a plan can ask for; a refund
// zeroes the record in place.
func TestReadLog(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	clk := newClock()
	s := NewRedis(c, WithPrefix(testPrefix(t)), withClock(clk.Now))
	for i, l := range []Limit{
		{Name: "w", Max: 255, Window: time.Second},
		{Name: "w", Max: 1 << 20, Window: time.Hour},
		{Name: "w", Max: MaxUnits, Window: 30 * 24 * time.Hour},
	} {
		p := mustPlan(t, "entries", l)
		id := "e" + strconv.Itoa(i)
		clk.Set(time.Duration(i) * time.Millisecond)
		var want []redislayout.Entry
		for j, cost := range []int64{1, l.Max / 3, l.Max / 2, 1} {
			if j == 2 {
				clk.Set(time.Duration(i)*time.Millisecond + 250*time.Microsecond)
			}
			d := charge(t, s, id, p, cost)
			if !d.Allowed {
				t.Fatalf("%v: cost %d denied", l, cost)
			}
			want = append(want, redislayout.Entry{Index: d.Receipt.index, At: d.Receipt.at, Cost: cost})
		}
		if ok, err := s.Refund(ctx, charge(t, s, id, p, 1).Receipt); !ok || err != nil {
			t.Fatalf("refund: %v %v", ok, err)
		}
		want = append(want, redislayout.Entry{Index: int64(len(want)), At: want[2].At, Cost: 0})
		got, err := redislayout.Read(ctx, c, s.key(id))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: log reads %v, want %v", l, got, want)
		}
	}
	if got, err := redislayout.Read(ctx, c, s.key("none")); got != nil || err != nil {
		t.Errorf("the log of an identity with none reads %v, %v", got, err)
	}
}

// Under concurrency across clients, a day limit admits exactly its max,
// never more: its counter is checked and charged in the same script as the
// windows.
func TestConcurrentPeriodExactness(t *testing.T) {
	ctx := context.Background()
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			prefix := testPrefix(t)
			clients := target.clients(t, 4)
			plan := mustPlan(t, "daily", Limit{Name: "w", Max: 1 << 20, Window: time.Minute}, PerDay(500))
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				s := NewRedis(clients[g%len(clients)], WithPrefix(prefix))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 40 {
						cost := int64(1 + (g+i)%5)
						d, err := s.Charge(ctx, "day", plan, cost)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(cost)
						}
					}
				}()
			}
			wg.Wait()
			s := NewRedis(clients[0], WithPrefix(prefix))
			d, err := s.Peek(ctx, "day", plan)
			if err != nil {
				t.Fatal(err)
			}
			// 64 x 40 charges of 1 to 5 units ask for far more than 500:
			// the day fills to exactly its max, or within a cost of it.
			if got := admitted.Load(); got != d.Limits[1].Used || got > 500 || got < 500-4 {
				t.Errorf("admitted %d, the day counts %d: want equal, at most 500 and within 4 of it", got, d.Limits[1].Used)
			}
		})
	}
}

// A log longer than the offsets whose text the library keeps (log.lua's
// textsBelow, 64 KiB) is written, refunded and settled at offsets past it
// as below it, by FCALL and by EVALSHA: 16,000 admitted charges of one
// unit, records of 5 bytes, make a log of some 80 KB, and the first,
// middle and last charges are refunded or settled.
func TestLogBeyondKeptTexts(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	const n = 16000
	p := mustPlan(t, "long", Limit{Name: "hour", Max: 2 * n, Window: time.Hour})
	for _, scripts := range []bool{false, true} {
		t.Run(fmt.Sprintf("scripts=%v", scripts), func(t *testing.T) {
			clk := newClock()
			opts := []RedisOption{WithPrefix(testPrefix(t)), withClock(clk.Now)}
			if scripts {
				opts = append(opts, withScriptsOnly())
			}
			s := NewRedis(c, opts...)
			var first, middle, last Receipt
			for i := range n {
				clk.Set(time.Duration(i) * 100 * time.Microsecond)
				d := charge(t, s, "long", p, 1)
				if !d.Allowed {
					t.Fatalf("charge %d denied: %+v", i, d)
				}
				switch i {
				case 0:
					first = d.Receipt
				case n / 2:
					middle = d.Receipt
				case n - 1:
					last = d.Receipt
				}
			}
			if size := c.StrLen(ctx, s.key("long")).Val(); size <= 64<<10 {
				t.Fatalf("the log is %d bytes, want more than 64 KiB", size)
			}
			for _, rc := range []Receipt{first, last} {
				if ok, err := s.Refund(ctx, rc); err != nil || !ok {
					t.Fatalf("Refund: %v, %v", ok, err)
				}
			}
			if _, ok, err := s.Settle(ctx, middle, 0); err != nil || !ok {
				t.Fatalf("Settle: %v, %v", ok, err)
			}
			if u := used(peek(t, s, "long", p)); !slices.Equal(u, []int64{n - 3}) {
				t.Errorf("used %v after three of %d charges given back, want [%d]", u, n, n-3)
			}
			if d := charge(t, s, "long", p, 5); !d.Allowed || !slices.Equal(used(d), []int64{n + 2}) {
				t.Errorf("a charge of 5 after them: allowed %v, used %v, want [%d]", d.Allowed, used(d), n+2)
			}
		})
	}
}

// TestPlansBeyondKept charges under three times as many distinct plans as
// the charge script keeps decoded (log.lua's plansMax), on a Redis of its
// own: the kept plans are dropped and made again, every decision is made
// under its own plan's limit, and the Lua memory of the functions stays
// within what the kept plans and texts take.
func TestPlansBeyondKept(t *testing.T) {
	const plansMax = 512 // log.lua's
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	luaMemory := func() int64 {
		info := c.Info(ctx, "memory").Val()
		_, rest, _ := strings.Cut(info, "used_memory_vm_functions:")
		v, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]), 10, 64)
		if err != nil {
			t.Fatalf("used_memory_vm_functions in INFO memory: %v", err)
		}
		return v
	}
	// Plan i differs from every other in its window, and allows 1 + i%4
	// charges: the charge after them is refused.
	plan := func(i int) Plan {
		return mustPlan(t, "p", Limit{Name: "window", Max: int64(1 + i%4), Window: time.Minute + time.Duration(i)*time.Millisecond})
	}
	check := func(i int, id string) {
		p := plan(i)
		for j := range p.Limits[0].Max + 1 {
			if d := charge(t, s, id, p, 1); d.Allowed != (j < p.Limits[0].Max) {
				t.Fatalf("plan %d, charge %d of %s: allowed %v under a max of %d", i, j+1, id, d.Allowed, p.Limits[0].Max)
			}
		}
	}
	check(0, "warm") // loads the library
	base := luaMemory()
	for i := range 3 * plansMax {
		check(i, "a"+strconv.Itoa(i))
	}
	// The first plans again, dropped since: made anew.
	for i := range 64 {
		check(i, "b"+strconv.Itoa(i))
	}
	grown := luaMemory() - base
	t.Logf("the functions' Lua memory grew by %d bytes over %d plans", grown, 3*plansMax+1)
	if grown > 1<<20 {
		t.Errorf("the functions' Lua memory grew by %d bytes over %d plans, want at most 1 MiB", grown, 3*plansMax+1)
	}
}
