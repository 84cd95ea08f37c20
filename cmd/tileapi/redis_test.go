package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// serve refuses a Redis whose maxmemory-policy may evict the quotas' keys
// (any but noeviction), in one line saying what to do, unless allowed; a
// Redis that will not say (CONFIG renamed away) is used, with a warning.
func TestRedisEvictionPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		redis  []string // redis-server's arguments
		env    map[string]string
		refuse string // what the refusal says; "" to start
		warn   string // what the log says when it starts
	}{
		{name: "allkeys-lru", redis: []string{"--maxmemory-policy", "allkeys-lru"}, refuse: "REDIS_URL: maxmemory-policy is allkeys-lru, which may evict the quotas' keys"},
		{name: "volatile-ttl", redis: []string{"--maxmemory-policy", "volatile-ttl"}, refuse: "REDIS_URL: maxmemory-policy is volatile-ttl"},
		{name: "allowed", redis: []string{"--maxmemory-policy", "allkeys-lru"}, env: map[string]string{"TILEAPI_ALLOW_EVICTING_REDIS": "1"},
			warn: "REDIS_URL's maxmemory-policy may evict the quotas' keys"},
		{name: "noeviction", redis: []string{"--maxmemory-policy", "noeviction"}},
		{name: "CONFIG disabled", redis: []string{"--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""},
			warn: "REDIS_URL's maxmemory-policy could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := quotatest.StartRedisServer(t, tc.redis...)
			env := map[string]string{"REDIS_URL": "redis://" + srv.Addr}
			for k, v := range tc.env {
				env[k] = v
			}
			if tc.refuse != "" {
				// Bounded: a server that does not refuse serves until then.
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err := run(ctx, []string{"tileapi", "serve", "-addr", "127.0.0.1:0", "-admin-addr", "none"},
					func(k string) string { return env[k] }, io.Discard, io.Discard)
				if err == nil || !strings.HasPrefix(err.Error(), tc.refuse) || strings.Contains(err.Error(), "\n") ||
					!strings.Contains(err.Error(), "-allow-evicting-redis (TILEAPI_ALLOW_EVICTING_REDIS=1)") {
					t.Errorf("error %v, want one line starting %q and naming the override", err, tc.refuse)
				}
				return
			}
			in := startServe(t, env)
			log := in.stderr.String()
			if tc.warn != "" && !strings.Contains(log, tc.warn) {
				t.Errorf("the log lacks %q:\n%s", tc.warn, log)
			}
			if tc.warn == "" && strings.Contains(log, "maxmemory-policy") {
				t.Errorf("a warning about a safe policy:\n%s", log)
			}
		})
	}
}

// With TILEAPI_TILE_CACHE_REDIS_URL, rendered tiles are cached in that
// Redis (which may evict) and quotas stay in REDIS_URL: a tile asked for
// again is a hit from the cache's Redis, though its lookup cannot ride in
// the round trip of its charge to the other.
func TestTileCacheApart(t *testing.T) {
	quotas := quotatest.StartRedisServer(t)
	cache := quotatest.StartRedisServer(t, "--maxmemory-policy", "allkeys-lru")
	in := startServe(t, map[string]string{
		"REDIS_URL":                    "redis://" + quotas.Addr,
		"TILEAPI_TILE_CACHE_REDIS_URL": "redis://" + cache.Addr,
		"TILEAPI_QUOTA_TIMEOUT":        "5s", // a loaded machine must not make a slow cache a miss
	})
	qc, cc := redis.NewClient(&redis.Options{Addr: quotas.Addr}), redis.NewClient(&redis.Options{Addr: cache.Addr})
	defer qc.Close()
	defer cc.Close()

	get := func() string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, in.url+"/v1/tiles/countries/2/2/1.mvt", nil)
		req.Header.Set("X-API-Key", "demo-free")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("tile: status %d", resp.StatusCode)
		}
		return resp.Header.Get("X-Tile-Cache")
	}
	if state := get(); state != "MISS" {
		t.Fatalf("the first request: X-Tile-Cache %q, want MISS", state)
	}
	// The tile is written to the cache behind the answer: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if firstKey(t, cc, "tileapi:tile:*") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no tile in the tile cache's Redis after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if state := get(); state != "HIT" {
		t.Errorf("the second request: X-Tile-Cache %q, want HIT from the tile cache's Redis", state)
	}
	for _, tc := range []struct {
		name    string
		c       *redis.Client
		pattern string
		want    bool
	}{
		{"tiles in the cache's Redis", cc, "tileapi:tile:*", true},
		{"no quota keys in the cache's Redis", cc, "tileapi:q:*", false},
		{"quota keys in REDIS_URL", qc, "tileapi:q:*", true},
		{"no tiles in REDIS_URL", qc, "tileapi:tile:*", false},
	} {
		if got := firstKey(t, tc.c, tc.pattern) != ""; got != tc.want {
			t.Errorf("%s: keys %s found: %v", tc.name, tc.pattern, got)
		}
	}
}

// firstKey is a key of c that matches pattern, or "".
func firstKey(t *testing.T, c *redis.Client, pattern string) string {
	t.Helper()
	ks, err := c.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) == 0 {
		return ""
	}
	return ks[0]
}

// A cluster's addresses are a list like any other: trimmed, empty items
// left out, and comma-separated ones split.
func TestClusterAddrsTrimmed(t *testing.T) {
	rdb, err := openRedis("REDIS_URL", "redis://:pw@h1:7000?addr=%20h2:7001%20&addr=&addr=h3:7002,%20h4:7003,")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("a %T, want a cluster client", rdb)
	}
	if got, want := cc.Options().Addrs, []string{"h1:7000", "h2:7001", "h3:7002", "h4:7003"}; !slices.Equal(got, want) {
		t.Errorf("addresses %q, want %q", got, want)
	}
	if cc.Options().Password != "pw" {
		t.Error("the password was lost")
	}
}
