package httpapi

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/redisbatch"
)

// tripLog records every round trip a client makes, as the names of the
// commands it carried. Added after redisbatch's hook, it sees what the
// batcher sends: a command alone, or a pipeline.
type tripLog struct {
	mu    sync.Mutex
	trips []string
}

func (l *tripLog) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (l *tripLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *tripLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.add(cmds...)
		return next(ctx, cmds)
	}
}

func (l *tripLog) add(cmds ...redis.Cmder) {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name()
	}
	slices.Sort(names)
	trip := strings.Join(names, "+")
	if strings.Trim(strings.NewReplacer("hello", "", "client", "", "+", "").Replace(trip), " ") == "" {
		return // a new connection's handshake, not a call
	}
	l.mu.Lock()
	l.trips = append(l.trips, trip)
	l.mu.Unlock()
}

// until returns the trips once done says they are all there (the
// background ones included), and a little after, so that one too many
// shows.
func (l *tripLog) until(t *testing.T, done func([]string) bool) []string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		ok := done(l.trips)
		l.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("round trips %q: not all there", l.trips)
		}
	}
	time.Sleep(100 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	trips := l.trips
	l.trips = nil
	return trips
}

func count(n int) func([]string) bool { return func(ts []string) bool { return len(ts) >= n } }

// A tile request in Redis mode makes one round trip on the client's path,
// hit or miss: the charge carries the cache lookup. A miss then stores the
// tile, and a hit lowers its charge to the hit price, both in the
// background. Only a miss price that does not fit costs a second trip, a
// charge at the hit price of a cached tile.
//
// On a Redis Cluster the charge and the lookup go to their own nodes, in
// parallel: one pipeline for the client, split by node, as the log of the
// cluster client's hook shows.
func TestTileRoundTrips(t *testing.T) {
	t.Run("single node", func(t *testing.T) {
		testTileRoundTrips(t, quotatest.NewClient(t, testenv.RedisURL(t)))
	})
	t.Run("cluster", func(t *testing.T) {
		testTileRoundTrips(t, quotatest.NewClusterClient(t, quotatest.RedisClusterAddrs(t)))
	})
}

func testTileRoundTrips(t *testing.T, rdb redis.UniversalClient) {
	redisbatch.Enable(rdb.(interface {
		AddHook(redis.Hook)
		Pipeline() redis.Pipeliner
	}))
	log := &tripLog{}
	rdb.AddHook(log)
	prefix := fmt.Sprintf("httpapitest:%d:%s:", time.Now().UnixNano(), t.Name())
	e := newEnv(t, with(func(c *Config) {
		c.Quota = quota.NewRedis(rdb, quota.WithPrefix(prefix))
		c.TileCache = tilecache.NewRedis(rdb, prefix+"tile:", time.Minute)
	}))

	get := func(path, plan, cache, cost string) {
		t.Helper()
		resp := e.get(t, path, key(plan)...)
		if resp.StatusCode != 200 || resp.Header.Get("X-Tile-Cache") != cache || resp.Header.Get("X-RateLimit-Cost") != cost {
			t.Fatalf("%s (%s): status %d, X-Tile-Cache %q, X-RateLimit-Cost %q; want 200, %s, %s", path, plan, resp.StatusCode,
				resp.Header.Get("X-Tile-Cache"), resp.Header.Get("X-RateLimit-Cost"), cache, cost)
		}
	}
	const (
		onPath = "fcall+get" // the charge and the lookup, one trip
		store  = "set"       // a miss's tile stored
		lower  = "fcall"     // a hit's charge lowered, or a second charge
	)
	// Load the scripts (a first FCALL finds the library missing, which it loads).
	get("/v1/tiles/countries/0/0/0.mvt", "pro", "MISS", "8")
	log.until(t, func(ts []string) bool { return slices.Contains(ts, store) })
	get("/v1/tiles/countries/0/0/0.mvt", "pro", "HIT", "2")
	log.until(t, func(ts []string) bool { return len(ts) > 1 && strings.HasPrefix(ts[len(ts)-1], "fcall") })

	for _, tc := range []struct {
		name, path, plan, cache, cost string
		trips                         []string
	}{
		{"miss", "/v1/tiles/places/2/2/1.mvt", "pro", "MISS", "16", []string{onPath, store}},
		{"hit", "/v1/tiles/places/2/2/1.mvt", "pro", "HIT", "4", []string{onPath, lower}},
		// five allows 5 units in 10 s: 16 never fits, the hit price 4
		// does. The charge at 16 is refused before any I/O.
		{"too costly a miss", "/v1/tiles/places/2/2/1.mvt", "five", "HIT", "4", []string{"get", lower}},
		{"warm", "/v1/tiles/places/9/259/176.mvt", "pro", "MISS", "4", []string{onPath, store}},
		// five has 4 used: the miss price, 4, is denied, and the hit
		// price, 1, charged in a second trip.
		{"denied at the miss price", "/v1/tiles/places/9/259/176.mvt", "five", "HIT", "1", []string{onPath, lower}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get(tc.path, tc.plan, tc.cache, tc.cost)
			if trips := log.until(t, count(len(tc.trips))); !slices.Equal(trips, tc.trips) {
				t.Errorf("round trips %q, want %q", trips, tc.trips)
			}
		})
	}
	// five is spent: a client that keeps asking is refused from the deny
	// cache at both prices, with no round trip, not even the lookup. The
	// first refusal at the hit price is Redis's; the cache holds it after.
	for i, want := range [][]string{{"get", lower}, nil, nil} {
		resp := e.get(t, "/v1/tiles/places/9/259/176.mvt", key("five")...)
		if resp.StatusCode != 429 {
			t.Fatalf("request %d on a spent plan: status %d, want 429", i, resp.StatusCode)
		}
		if trips := log.until(t, count(len(want))); !slices.Equal(trips, want) {
			t.Errorf("request %d on a spent plan: round trips %q, want %q", i, trips, want)
		}
	}
	// What the quota holds in the end: every hit at its hit price.
	if used := e.used(t, key("pro")...); used[len(used)-1] != 8+2+16+4+4 {
		t.Errorf("pro used %v, want 34 on the longest limit", used)
	}
	if used := e.used(t, key("five")...); used[0] != 4+1 {
		t.Errorf("five used %v, want 5", used)
	}
}
