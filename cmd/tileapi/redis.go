package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/httpapi"
)

// checkEviction refuses a Redis whose maxmemory-policy may evict the
// quotas' keys, unless allowed. Only noeviction is safe: an allkeys-*
// policy may evict any key, and a volatile-* one any key with a TTL, which
// every log and counter of the quota has; an evicted key is a budget
// forgotten, its charges admitted again. A Redis that does not say (CONFIG
// disabled, as on some managed services) is logged and used. On a cluster
// every primary is asked.
func checkEviction(ctx context.Context, rdb redis.UniversalClient, allowed bool, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var (
		mu     sync.Mutex
		policy string // the first policy that may evict
	)
	get := func(ctx context.Context, c redis.Cmdable) error {
		m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return err
		}
		p, ok := m["maxmemory-policy"]
		if !ok {
			return fmt.Errorf("CONFIG GET maxmemory-policy: no answer")
		}
		mu.Lock()
		defer mu.Unlock()
		if p != "noeviction" && policy == "" {
			policy = p
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return get(ctx, c) })
	} else {
		err = get(ctx, rdb)
	}
	switch {
	case err != nil:
		log.Warn("REDIS_URL's maxmemory-policy could not be read; unless it is noeviction, Redis may evict the quotas' keys, forgetting what was charged", "err", err)
	case policy == "":
	case allowed:
		log.Warn("REDIS_URL's maxmemory-policy may evict the quotas' keys, forgetting what was charged (TILEAPI_ALLOW_EVICTING_REDIS)", "maxmemory_policy", policy)
	default:
		return fmt.Errorf("REDIS_URL: maxmemory-policy is %s, which may evict the quotas' keys and so forget what was charged: set it to noeviction, or start with -allow-evicting-redis (TILEAPI_ALLOW_EVICTING_REDIS=1); an evicting Redis suits the tile cache alone (TILEAPI_TILE_CACHE_REDIS_URL)", policy)
	}
	return nil
}

// apartCache is a tile cache in another Redis than the quotas'. It has
// only Get and Set: httpapi sends a tile's lookup in the round trip of its
// charge where the cache can (Along), and this one cannot, the charge
// going to another server; so its lookup is a call of its own, to its own
// Redis, before the charge.
type apartCache struct{ httpapi.TileCache }

// redisConns is how many connections rdb may open at most.
func redisConns(rdb redis.UniversalClient) int {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		// A pool to each node: those given, at least.
		return c.Options().PoolSize * max(1, len(c.Options().Addrs))
	}
	return 0
}

// trimAddrs is a cluster URL with its addr parameters trimmed of spaces,
// empty ones left out; an addr may also list several, comma-separated.
// A URL that does not parse is returned as it is, for its parser to
// refuse.
func trimAddrs(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q["addr"] = splitList(strings.Join(q["addr"], ","))
	u.RawQuery = q.Encode()
	return u.String()
}
