package plans

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// idleIdentities is how many anonymous identities the tests below make
// idle and measure.
const idleIdentities = 20_000

// An anonymous identity (a client network) that has gone quiet costs at
// most 200 bytes in process once its windows have passed: the compiled-in
// anonymous plan has no month, so nothing of it outlives its minute
// window, and quota.Memory sweeps it. Before, its month counter stayed to
// the end of the month: 700 to 818 bytes an identity.
func TestIdleAnonymousInProcess(t *testing.T) {
	anon, _ := Defaults().Lookup(Anonymous)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	store := quota.NewMemory(func() time.Time { return now })
	ctx := context.Background()
	// Sweepers: one identity a shard would do; enough that every shard
	// has a few, and their calls pass every shard's sweep.
	sweepers := make([]string, 256)
	for i := range sweepers {
		sweepers[i] = "ip:198.51.100." + strconv.Itoa(i)
		store.Charge(ctx, sweepers[i], anon.Quota, 1)
	}
	before := heap()
	for i := range idleIdentities {
		if d, err := store.Charge(ctx, fmt.Sprintf("ip:2001:db8:%x::/64", i), anon.Quota, 1); err != nil || !d.Allowed {
			t.Fatalf("identity %d: %+v %v", i, d, err)
		}
	}
	busy := heap()
	now = now.Add(2 * time.Minute) // past every window of the plan
	for range 1200 {
		for _, s := range sweepers {
			store.Peek(ctx, s, anon.Quota)
		}
	}
	idle := heap()
	runtime.KeepAlive(store) // measured with it, not collected
	perBusy := float64(busy-before) / idleIdentities
	perIdle := float64(max(idle, before)-before) / idleIdentities
	t.Logf("%d anonymous identities: %.0f bytes each while charged, %.0f once idle", idleIdentities, perBusy, perIdle)
	if perIdle > 200 {
		t.Errorf("an idle anonymous identity costs %.0f bytes in process, want at most 200", perIdle)
	}
	if perBusy < 200 {
		t.Errorf("a charged identity measures %.0f bytes: the measure does not see the identities", perBusy)
	}
}

// heap returns the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// In Redis an idle anonymous identity keeps a key only until its longest
// window has passed (its log's TTL), and no counter: at most 64 bytes once
// idle, measured on a Redis of the test's own.
func TestIdleAnonymousInRedis(t *testing.T) {
	anon, _ := Defaults().Lookup(Anonymous)
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	ctx := context.Background()
	store := quota.NewRedis(c)
	if _, err := store.Charge(ctx, "ip:warm-up", anon.Quota, 1); err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, quota.DefaultPrefix+"{ip:warm-up}:l5")
	before := usedMemory(t, c)
	for i := range idleIdentities {
		if _, err := store.Charge(ctx, fmt.Sprintf("ip:2001:db8:%x::/64", i), anon.Quota, 1); err != nil {
			t.Fatal(err)
		}
	}
	busy := usedMemory(t, c)
	// Every key this left lives at most a quarter more than the plan's
	// longest window (quota.Redis sets a log's TTL again only every quarter
	// window).
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != idleIdentities {
		t.Errorf("%d keys for %d identities, want one each (a log, no counters)", len(keys), idleIdentities)
	}
	for _, k := range keys[:100] {
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute*5/4 {
			t.Fatalf("key %s lives %v, want at most the minute window and a quarter", k, ttl)
		}
	}
	// Once their windows have passed, they are gone: as Redis would find
	// them after a minute, made to happen now.
	for _, k := range keys {
		c.PExpire(ctx, k, time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.DBSize(ctx).Val() > 0 && time.Now().Before(deadline) {
		c.Scan(ctx, 0, "*", 1000) // touching keys expires them
		time.Sleep(10 * time.Millisecond)
	}
	idle := usedMemory(t, c)
	perBusy := float64(busy-before) / idleIdentities
	perIdle := float64(max(idle, before)-before) / idleIdentities
	t.Logf("%d anonymous identities in Redis: %.0f bytes each while charged, %.0f once idle", idleIdentities, perBusy, perIdle)
	if n := c.DBSize(ctx).Val(); n > 0 {
		t.Errorf("%d keys left after their TTL", n)
	}
	if perIdle > 64 {
		t.Errorf("an idle anonymous identity costs %.0f bytes in Redis, want at most 64", perIdle)
	}
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}
