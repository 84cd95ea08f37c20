package redisbatch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/quotatest/faultproxy"
	"github.com/tileapi/tileapi/quota/redisbatch"
)

func TestMain(m *testing.M) { os.Exit(quotatest.Main(m)) }

// prefix gives each test its own keys on the shared servers.
func prefix(t *testing.T) string {
	return fmt.Sprintf("redisbatchtest:%d:%s:", time.Now().UnixNano(), t.Name())
}

// singleNode is a client with production's options of the Redis at addr,
// or of the shared test server where addr is "".
func singleNode(t *testing.T, addr string) *redis.Client {
	t.Helper()
	if addr == "" {
		return quotatest.NewClient(t, quotatest.RedisURL(t))
	}
	return quotatest.NewClient(t, "redis://"+addr)
}

func cluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	return quotatest.NewClusterClient(t, quotatest.RedisClusterAddrs(t))
}

// clients are the deployments every behaviour must hold on.
func clients(t *testing.T) map[string]redis.UniversalClient {
	return map[string]redis.UniversalClient{"redis": singleNode(t, ""), "cluster": cluster(t)}
}

// A caller alone is sent at once, on its own: one command, one round trip,
// every time.
func TestLoneCallerGoesAlone(t *testing.T) {
	ctx := context.Background()
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			b := redisbatch.Enable(c.(batchable))
			key := prefix(t) + "n"
			for i := range 20 {
				if n, err := c.Incr(ctx, key).Result(); err != nil || n != int64(i+1) {
					t.Fatalf("incr %d: %d, %v", i, n, err)
				}
			}
			if s := b.Stats(); s.Commands != 20 || s.RoundTrips != 20 {
				t.Errorf("20 calls one after another: %+v, want 20 commands in 20 round trips", s)
			}
		})
	}
}

// Many callers at once share round trips, and each gets its own answer:
// every increment is counted once, every caller sees a distinct value.
func TestConcurrentCallersCoalesce(t *testing.T) {
	ctx := context.Background()
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			b := redisbatch.Enable(c.(batchable))
			p := prefix(t)
			const callers, each, keys = 200, 20, 8
			seen := make([]map[int64]bool, keys)
			for i := range seen {
				seen[i] = map[int64]bool{}
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						k := (g + i) % keys
						n, err := c.Incr(ctx, p+"{"+strconv.Itoa(k)+"}").Result()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if seen[k][n] {
							t.Errorf("key %d: value %d answered twice", k, n)
						}
						seen[k][n] = true
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			var total int64
			for k := range keys {
				n, err := c.Get(ctx, p+"{"+strconv.Itoa(k)+"}").Int64()
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
			if total != callers*each {
				t.Errorf("the keys count %d increments, want %d", total, callers*each)
			}
			s := b.Stats()
			t.Logf("%d commands in %d round trips", s.Commands, s.RoundTrips)
			if s.RoundTrips >= s.Commands {
				t.Errorf("%d concurrent callers: %d commands in %d round trips, want fewer round trips", callers, s.Commands, s.RoundTrips)
			}
		})
	}
}

type batchable interface {
	AddHook(redis.Hook)
	Pipeline() redis.Pipeliner
}

// A command that fails in a batch fails alone: the others of the same
// round trip succeed. The bad and good commands are one caller's
// pipeline, so they are certainly in one round trip, and the same mix
// runs from many callers at once.
func TestErrorsStayPerCall(t *testing.T) {
	ctx := context.Background()
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			b := redisbatch.Enable(c.(batchable))
			p := prefix(t)
			if err := c.Set(ctx, p+"text", "not a number", 0).Err(); err != nil {
				t.Fatal(err)
			}
			bad := redis.NewIntCmd(ctx, "incr", p+"text")
			good := redis.NewIntCmd(ctx, "incr", p+"n")
			script := redis.NewCmd(ctx, "eval", "return redis.call('nosuchcommand')", "0")
			other := redis.NewStatusCmd(ctx, "set", p+"other", "v")
			pipe := c.(batchable).Pipeline()
			for _, cmd := range []redis.Cmder{bad, good, script, other} {
				_ = pipe.Process(ctx, cmd)
			}
			before := b.Stats()
			if _, err := pipe.Exec(ctx); err == nil {
				t.Error("a pipeline holding failing commands reported no error")
			}
			if got := b.Stats(); got.RoundTrips-before.RoundTrips != 1 || got.Commands-before.Commands != 4 {
				t.Errorf("four commands: %+v then %+v, want one round trip", before, got)
			}
			if other.Err() != nil {
				t.Fatalf("the command beside failing ones failed: %v", other.Err())
			}
			if bad.Err() == nil || good.Err() != nil || good.Val() != 1 || script.Err() == nil {
				t.Errorf("bad: %v; good: %d, %v; script: %v", bad.Err(), good.Val(), good.Err(), script.Err())
			}

			var wg sync.WaitGroup
			for g := range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					if g%2 == 0 {
						err = c.Incr(ctx, p+"text").Err()
						if err == nil || errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("incr of text: %v, want Redis's error", err)
						}
						return
					}
					if err = c.Incr(ctx, p+"m").Err(); err != nil {
						t.Errorf("incr beside failing ones: %v", err)
					}
				}()
			}
			wg.Wait()
			if n, err := c.Get(ctx, p+"m").Int(); n != 50 || err != nil {
				t.Errorf("the good increments count %d, %v, want 50", n, err)
			}
		})
	}
}

// On a cluster a batch reaches each node its commands belong to: a
// pipeline of commands of keys on every node all land.
func TestClusterBatchSpansNodes(t *testing.T) {
	ctx := context.Background()
	c := cluster(t)
	b := redisbatch.Enable(c)
	p := prefix(t)
	// Keys spread over the slots, so over the three masters.
	var cmds []redis.Cmder
	var keys []string
	for i := range 30 {
		k := p + "{" + strconv.Itoa(i) + "}"
		keys = append(keys, k)
		cmds = append(cmds, redis.NewStatusCmd(ctx, "set", k, strconv.Itoa(i)))
	}
	nodes := map[string]bool{}
	for _, k := range keys {
		n, err := c.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		nodes[n.Options().Addr] = true
	}
	if len(nodes) < 2 {
		t.Fatalf("the keys fall on %d node, want several", len(nodes))
	}
	pipe := c.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	before := b.Stats()
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Stats(); got.RoundTrips-before.RoundTrips != 1 {
		t.Errorf("one batch over %d nodes: %+v then %+v", len(nodes), before, got)
	}
	for i, k := range keys {
		if err := cmds[i].Err(); err != nil {
			t.Errorf("set %s: %v", k, err)
		}
		if v, err := c.Get(ctx, k).Result(); err != nil || v != strconv.Itoa(i) {
			t.Errorf("%s = %q, %v", k, v, err)
		}
	}
}

// Whatever Redis does, a caller waits no longer than its context: hung
// (black-holed) or slow, alone or queued behind others. Without the budget
// a call would wait for the client's read timeout, a minute here. The
// margin is for the scheduling of a loaded 2-core machine, where these
// calls were seen to return at most 3 ms past their budget.
func TestCallersKeepTheirDeadline(t *testing.T) {
	const budget, margin = 50 * time.Millisecond, 100 * time.Millisecond
	for _, fault := range []struct {
		name  string
		apply func(*faultproxy.Proxy)
	}{
		{"hung", (*faultproxy.Proxy).BlackHole},
		{"slow", func(p *faultproxy.Proxy) { p.SetLatency(time.Second, time.Second) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			proxy, err := faultproxy.Start(addrOf(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { proxy.Close() })
			c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
			t.Cleanup(func() { c.Close() })
			redisbatch.Enable(c)
			key := prefix(t) + "n"
			if err := c.Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			fault.apply(proxy)
			var wg sync.WaitGroup
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), budget)
					defer cancel()
					start := time.Now()
					err := c.Incr(ctx, key).Err()
					if took := time.Since(start); took > budget+margin {
						t.Errorf("a call took %s with Redis %s; want at most its budget %s and %s", took, fault.name, budget, margin)
					}
					if err == nil {
						t.Errorf("a call to a %s Redis succeeded", fault.name)
					}
				}()
			}
			wg.Wait()
		})
	}
}

// A queued command whose caller has gone is never sent: here it queues
// behind a slow round trip, its deadline passes, and when that trip
// returns it is dropped, so only the first increment ever runs.
func TestAbandonedCallIsNotSent(t *testing.T) {
	ctx := context.Background()
	proxy, err := faultproxy.Start(addrOf(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	c := singleNode(t, proxy.Addr())
	b := redisbatch.Enable(c, redisbatch.WithMaxInFlight(1))
	key := prefix(t) + "n"
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(200*time.Millisecond, 200*time.Millisecond)
	first := make(chan error)
	trips := b.Stats().RoundTrips
	go func() { first <- c.Incr(ctx, key).Err() }()
	// The first is out once the batcher has counted its round trip.
	for deadline := time.Now().Add(5 * time.Second); b.Stats().RoundTrips == trips; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first increment did not leave in 5 s")
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := c.Incr(short, key).Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the queued call: %v, want its deadline", err)
	}
	cancel()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	if err := proxy.Settle(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Get(ctx, key).Int(); n != 1 || err != nil {
		t.Errorf("the key counts %d, %v: want 1, the abandoned increment unsent", n, err)
	}
}

// addrOf is the host:port of the test Redis.
func addrOf(t *testing.T) string {
	opt, err := redis.ParseURL(quotatest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	return opt.Addr
}
