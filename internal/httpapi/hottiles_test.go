package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/dataversion"
	"github.com/tileapi/tileapi/internal/seed"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/redisbatch"
)

// hotRedis is a Redis client as serve opens it, batched, with its round
// trips logged.
func hotRedis(t *testing.T) (*redis.Client, *tripLog) {
	rdb := quotatest.NewClient(t, testenv.RedisURL(t))
	redisbatch.Enable(rdb)
	log := &tripLog{}
	rdb.AddHook(log)
	return rdb, log
}

// versionTable is a database of its own whose data version a test may
// renew, as a load does.
func versionTable(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := spatialtest.Migrated(t)
	if _, err := pool.Exec(t.Context(), `INSERT INTO data_version (version, loaded_at) VALUES ('first', now())`); err != nil {
		t.Fatal(err)
	}
	return pool
}

// watch reads the data version in pool every 10 ms, as serve does every
// few seconds.
func watch(t *testing.T, pool *pgxpool.Pool) *dataversion.Watch {
	t.Helper()
	read := func(ctx context.Context) (string, error) { return seed.Version(ctx, pool) }
	w, err := dataversion.Start(t.Context(), read, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// withHotTiles serves tiles from PostGIS, with the quota in Redis and the
// tile cache in Redis under prefix with the hot tiles in process, keyed by
// version.
func withHotTiles(rdb redis.UniversalClient, prefix string, version DataVersion) []option {
	return []option{withPostGIS(), with(func(c *Config) {
		c.Quota = quota.NewRedis(rdb, quota.WithPrefix(prefix))
		c.TileCache = tilecache.NewHot(tilecache.NewRedis(rdb, prefix+"tile:", time.Minute), 1<<20)
		c.DataVersion = version
	})}
}

// A tile held in process (tilecache.Hot) is known a hit before the
// charge: charged its hit price in the one charge, with no lookup and no
// settlement after, and the usage history records what was charged and
// nothing given back. A server that finds a tile in Redis only keeps the
// path of a Redis hit once, then holds it too. A load (a new data
// version, read again by each server's dataversion.Watch) makes the tile
// a miss on both servers, however hot it was.
func TestHotTiles(t *testing.T) {
	rdb, log := hotRedis(t)
	versions := versionTable(t)
	watchA, watchB := watch(t, versions), watch(t, versions)
	prefix := fmt.Sprintf("httpapitest:%d:%s:", time.Now().UnixNano(), t.Name())
	a := newEnv(t, withHotTiles(rdb, prefix, watchA)...)
	b := newEnv(t, withHotTiles(rdb, prefix, watchB)...)

	get := func(e *env, path, cache, cost string) {
		t.Helper()
		resp := e.get(t, path, key("pro")...)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Tile-Cache") != cache || resp.Header.Get("X-RateLimit-Cost") != cost || resp.Header.Get(headerSettledCost) != "" {
			t.Fatalf("%s: status %d, X-Tile-Cache %q, X-RateLimit-Cost %q, settled %q; want 200, %s, %s, not settled", path, resp.StatusCode,
				resp.Header.Get("X-Tile-Cache"), resp.Header.Get("X-RateLimit-Cost"), resp.Header.Get(headerSettledCost), cache, cost)
		}
	}
	const (
		onPath = "fcall+get+pttl" // the charge with the lookup and its TTL, one trip
		charge = "fcall"          // a charge alone; or a Redis hit's settlement
		store  = "set"            // a miss's tile stored
	)
	// Load the scripts (a first FCALL finds the library missing, which it loads).
	get(a, "/v1/tiles/countries/0/0/0.mvt", "MISS", "8")
	log.until(t, func(ts []string) bool { return slices.Contains(ts, store) })

	const tile = "/v1/tiles/places/2/2/1.mvt"
	step := func(name string, e *env, cache, cost string, want ...string) {
		t.Helper()
		get(e, tile, cache, cost)
		if trips := log.until(t, count(len(want))); !slices.Equal(trips, want) {
			t.Errorf("%s: round trips %q, want %q", name, trips, want)
		}
	}
	step("a miss", a, "MISS", "16", onPath, store)
	for i := range 5 {
		step(fmt.Sprintf("hit %d in process", i), a, "HIT", "4", charge)
	}
	// B has it in Redis only: charged the miss price with the lookup,
	// lowered after; then B holds it too.
	step("B's hit in Redis", b, "HIT", "4", onPath, charge)
	step("B's hit in process", b, "HIT", "4", charge)

	// A load: the watches read the new version within 10 ms.
	old := watchA.Current()
	if err := seed.Renew(t.Context(), versions); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); watchA.Current() == old || watchB.Current() == old; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watches did not read the new version")
		}
	}
	step("A after a load", a, "MISS", "16", onPath, store)
	step("A hot again", a, "HIT", "4", charge)
	// B's copy in process is of the old version: B looks in Redis, and
	// finds the tile A rendered of the new data.
	step("B after a load", b, "HIT", "4", onPath, charge)
	step("B hot again", b, "HIT", "4", charge)

	// The quota holds, and the usage history records, the prices charged.
	const want = 8 + 16 + 5*4 + 4 + 4 + 16 + 4 + 4 + 4
	if used := a.used(t, key("pro")...); used[len(used)-1] != want {
		t.Errorf("pro used %v, want %d on the longest limit", used, want)
	}
	var charged, givenBack int64
	for _, e := range []*env{a, b} {
		var u struct {
			Total usageCounts `json:"total"`
		}
		decode(t, e.get(t, "/v1/usage", key("pro")...), http.StatusOK, &u)
		charged, givenBack = charged+u.Total.Charged, givenBack+u.Total.GivenBack
	}
	// B's two hits in Redis were charged 16 and given back 12; nothing
	// else was given back.
	if charged-givenBack != want || givenBack != 2*12 {
		t.Errorf("usage history: charged %d, given back %d; want %d settled, 24 given back (B's hits in Redis)", charged, givenBack, want)
	}
}

// Clients asking at once for tiles held in process, under -race: every
// request is charged the price it is told, and the quota holds the sum of
// those prices, whatever the order in which the tiles were first cached.
func TestHotTilesConcurrent(t *testing.T) {
	rdb, _ := hotRedis(t)
	prefix := fmt.Sprintf("httpapitest:%d:%s:", time.Now().UnixNano(), t.Name())
	e := newEnv(t, withHotTiles(rdb, prefix, watch(t, versionTable(t)))...)
	paths := []string{"/v1/tiles/places/2/2/1.mvt", "/v1/tiles/places/3/4/2.mvt", "/v1/tiles/countries/1/1/0.mvt"}
	var (
		mu            sync.Mutex
		total, misses int64
		wg            sync.WaitGroup
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				resp := e.get(t, paths[(g+i)%len(paths)], key("pro")...)
				resp.Body.Close()
				cost, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
				if resp.StatusCode != 200 || err != nil {
					t.Errorf("status %d, cost %q", resp.StatusCode, resp.Header.Get("X-RateLimit-Cost"))
					return
				}
				mu.Lock()
				total += cost
				if resp.Header.Get("X-Tile-Cache") == "MISS" {
					misses++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if misses == 0 || misses > 8*int64(len(paths)) {
		t.Errorf("%d misses, want one at least and at most one a tile a client", misses)
	}
	// A hit found in Redis is lowered in the background: wait for it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		used := e.used(t, key("pro")...)
		if used[len(used)-1] == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pro used %v, want %d, the sum of the prices told", used, total)
		}
	}
}
