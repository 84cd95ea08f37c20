package quota

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/testenv"
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
	srv := testenv.StartRedisServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	s := NewRedis(c, WithPrefix(testPrefix(t)))
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

// A SCRIPT FLUSH (as after a failover) must not fail a single call: EVALSHA
// falls back to EVAL on NOSCRIPT.
func TestNoScriptRecovery(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			ctx := context.Background()
			c := target.clients(t, 1)[0]
			s := NewRedis(c, WithPrefix(testPrefix(t)))
			p := mustPlan(t, "noscript", PerMinute(10))
			for i := range 3 {
				flush := func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() }
				var err error
				if cc, ok := c.(*redis.ClusterClient); ok {
					err = cc.ForEachShard(ctx, flush)
				} else {
					err = flush(ctx, c.(*redis.Client))
				}
				if err != nil {
					t.Fatal(err)
				}
				d, err := s.Charge(ctx, "n", p, 1)
				if err != nil || !d.Allowed || d.Limits[0].Used != int64(i+1) {
					t.Fatalf("charge %d after SCRIPT FLUSH: %+v, %v", i, d, err)
				}
				if _, err := s.Refund(ctx, d.Receipt); err != nil {
					t.Fatalf("refund after SCRIPT FLUSH: %v", err)
				}
				charge(t, s, "n", p, 1)
			}
		})
	}
}

// Both keys expire one longest window after the last admit; a peek or a
// denial never creates a key without a TTL, and idle identities vanish.
func TestKeysExpire(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	const short, long = 300 * time.Millisecond, time.Second
	p := mustPlan(t, "ttl", Limit{Name: "short", Max: 2, Window: short}, Limit{Name: "long", Max: 5, Window: long})
	keys := s.keys("e")
	checkTTLs := func(when string) {
		t.Helper()
		for _, k := range keys {
			if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > long {
				t.Errorf("%s: PTTL %s = %v, want in (0, %v]", when, k, ttl, long)
			}
		}
	}

	peek(t, s, "e", p)
	if n := c.Exists(ctx, keys[:]...).Val(); n != 0 {
		t.Fatalf("a peek at an idle identity created %d keys", n)
	}
	charge(t, s, "e", p, 2)
	charge(t, s, "e", p, 1) // denied by the short limit
	checkTTLs("after an admit and a denial")
	time.Sleep(long + 200*time.Millisecond)
	if n := c.Exists(ctx, keys[:]...).Val(); n != 0 {
		t.Errorf("%d keys of an idle identity remain one window after the last admit", n)
	}
	// A peek after the short window has emptied, which rewrites the state,
	// leaves it no longer-lived than the log.
	charge(t, s, "e", p, 2)
	time.Sleep(short + 50*time.Millisecond) // out of the short window only
	peek(t, s, "e", p)
	checkTTLs("after a peek")
}

// Both keys of an identity share one cluster slot whatever bytes the
// identity holds: the hash tag is the escaped identity, which braces in it
// cannot steer, and identities spread over slots.
func TestClusterHashTag(t *testing.T) {
	ctx := context.Background()
	c := clusterClient(t)
	s := NewRedis(c, WithPrefix("tileapi:q:"))
	slots := map[int64]bool{}
	for _, id := range []string{"plain", "{x}", "a}b{c", "}", "{", "with space", "\x00\xff", "k:{user1}", "ab", "ba", "abc"} {
		keys := s.keys(id)
		slot := c.ClusterKeySlot(ctx, keys[0]).Val()
		if other := c.ClusterKeySlot(ctx, keys[1]).Val(); other != slot {
			t.Errorf("%q: keys %q and %q are in slots %d and %d", id, keys[0], keys[1], slot, other)
		}
		if tagged := c.ClusterKeySlot(ctx, "other{"+escapeIdentity(id)+"}").Val(); tagged != slot {
			t.Errorf("%q: key %q is in slot %d, not its tag's slot %d", id, keys[0], slot, tagged)
		}
		slots[slot] = true
	}
	if len(slots) < 3 {
		t.Errorf("11 identities landed in only %d slots: the hash tag is not the identity", len(slots))
	}
}

func TestEscapeIdentityIsOneToOne(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"a", "a ", "a%20", "a%2520", "{a}", "%7Ba%7D", "a:b", "a\x00", "a\x01", "ä"} {
		e := escapeIdentity(id)
		if prev, dup := seen[e]; dup {
			t.Errorf("%q and %q both escape to %q", prev, id, e)
		}
		for _, r := range e {
			if r == '{' || r == '}' || r < 0x21 || r > 0x7e {
				t.Errorf("escape(%q) = %q holds %q", id, e, r)
			}
		}
		seen[e] = id
	}
}

// The members charge.lua packs are the ones memberOf builds (receipts name
// them), ParseLogEntry reads them back, and their admit time is their score.
func TestLogEntries(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	clk := newClock()
	s := NewRedis(c, WithPrefix(testPrefix(t)), WithClock(clk.Now))
	p := mustPlan(t, "entries", Limit{Name: "w", Max: MaxUnits, Window: time.Hour})
	costs := []int64{1, 255, 256, 65535, 65536, 1<<24 - 1, 1 << 24, 1<<32 - 1, 1 << 32, 1<<40 - 1, 1 << 40}
	for i, cost := range costs {
		id := "e" + strconv.Itoa(i)
		clk.Set(time.Duration(i) * time.Millisecond)
		want := map[string]int64{}
		for range 1 + boolNum(2*cost <= MaxUnits) { // a second at the same instant is packed apart
			d := charge(t, s, id, p, cost)
			if !d.Allowed {
				t.Fatalf("cost %d denied", cost)
			}
			want[d.Receipt.member] = cost
		}
		zs, err := c.ZRangeWithScores(ctx, s.LogKey(id), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(zs) != len(want) {
			t.Fatalf("cost %d: log holds %d entries, want %d", cost, len(zs), len(want))
		}
		for _, z := range zs {
			m := z.Member.(string)
			at, got, err := ParseLogEntry(m)
			switch {
			case err != nil:
				t.Errorf("ParseLogEntry(%q): %v", m, err)
			case want[m] == 0:
				t.Errorf("member %x is no receipt's", m)
			case got != cost || at != int64(z.Score):
				t.Errorf("member %x reads as (%d, %d), want (%d, %d)", m, at, got, int64(z.Score), cost)
			}
		}
	}
	for _, bad := range []string{"", "1234567", "12345678901234", "1:5"} {
		if _, _, err := ParseLogEntry(bad); err == nil {
			t.Errorf("ParseLogEntry(%q) accepted it", bad)
		}
	}
}
