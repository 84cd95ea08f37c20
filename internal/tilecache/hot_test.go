package tilecache

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// newHot returns a Hot cache of maxBytes in process over a Redis cache of
// a minute's TTL, its Redis client, its prefix, and a clock for the
// process's copies.
func newHot(t *testing.T, maxBytes int) (*Hot, *redis.Client, string, *time.Time) {
	t.Helper()
	rdb := quotatest.NewClient(t, testenv.RedisURL(t))
	prefix := fmt.Sprintf("tilecachetest:%d:%s:", time.Now().UnixNano(), t.Name())
	h := NewHot(NewRedis(rdb, prefix, time.Minute), maxBytes)
	now := time.Unix(0, 0)
	h.mem.now = func() time.Time { return now }
	return h, rdb, prefix, &now
}

// A tile stored is held in process and in Redis; one found in Redis only
// is held in process from then on, for no longer than Redis keeps it.
func TestHotGetSet(t *testing.T) {
	ctx := context.Background()
	h, rdb, prefix, now := newHot(t, 1<<20)
	tile := []byte("\x1a\x02mvt")
	if err := h.Set(ctx, "v1/places/0/0/0", tile); err != nil {
		t.Fatal(err)
	}
	if got, ok := h.Local("v1/places/0/0/0"); !ok || !bytes.Equal(got, tile) {
		t.Errorf("Local after Set = %q, %v", got, ok)
	}
	if got, err := rdb.Get(ctx, prefix+"v1/places/0/0/0").Bytes(); err != nil || !bytes.Equal(got, tile) {
		t.Errorf("Redis after Set = %q, %v", got, err)
	}

	// Another server stored these: Redis has them, this process not yet.
	rdb.Set(ctx, prefix+"v1/places/1/0/0", "short", 30*time.Second)
	rdb.Set(ctx, prefix+"v1/places/1/1/0", "forever", 0)
	if _, ok := h.Local("v1/places/1/0/0"); ok {
		t.Fatal("a tile only in Redis found in process")
	}
	for _, key := range []string{"v1/places/1/0/0", "v1/places/1/1/0"} {
		if _, ok, err := h.Get(ctx, key); !ok || err != nil {
			t.Fatalf("Get(%s): ok=%v err=%v", key, ok, err)
		}
		if _, ok := h.Local(key); !ok {
			t.Errorf("%s read from Redis not kept in process", key)
		}
	}
	if _, ok, err := h.Get(ctx, "v2/places/0/0/0"); ok || err != nil {
		t.Errorf("another data version: ok=%v err=%v", ok, err)
	}

	// Redis keeps the first 30 s more: so does the process. The one
	// without an expiry, and the one this process stored, live the
	// cache's TTL.
	*now = now.Add(31 * time.Second)
	if _, ok := h.Local("v1/places/1/0/0"); ok {
		t.Error("a tile kept in process longer than Redis keeps it")
	}
	if _, ok := h.Local("v1/places/1/1/0"); !ok {
		t.Error("a tile without an expiry in Redis dropped before the TTL")
	}
	*now = now.Add(30 * time.Second)
	for _, key := range []string{"v1/places/0/0/0", "v1/places/1/1/0"} {
		if _, ok := h.Local(key); ok {
			t.Errorf("%s kept in process past the TTL", key)
		}
	}
}

// The lookup sent along with another command (as with a charge) reads the
// tile and its time to live in the same trip, and keeps a tile found.
func TestHotAlong(t *testing.T) {
	ctx := context.Background()
	h, rdb, prefix, _ := newHot(t, 1<<20)
	rdb.Set(ctx, prefix+"v1/places/2/0/0", "tile", time.Minute)
	for _, key := range []string{"v1/places/2/0/0", "v1/places/2/1/0"} {
		r := h.Along(key)
		pipe := rdb.Pipeline()
		pipe.Ping(ctx) // the other command
		for _, c := range r.Cmds() {
			pipe.Process(ctx, c)
		}
		pipe.Exec(ctx)
		_, hit, err := r.Result()
		if err != nil || hit != (key == "v1/places/2/0/0") {
			t.Errorf("%s: hit=%v err=%v", key, hit, err)
		}
		if _, ok := h.Local(key); ok != hit {
			t.Errorf("%s: in process %v after a lookup that hit %v", key, ok, hit)
		}
	}
}

// Many tiles past the bound: the process holds at most the bound, the
// latest ones, and Redis still serves those let go.
func TestHotBound(t *testing.T) {
	ctx := context.Background()
	const bound, size, n = 10_000, 1000, 100
	h, _, _, _ := newHot(t, bound)
	tile := bytes.Repeat([]byte{1}, size)
	for i := range n {
		if err := h.Set(ctx, fmt.Sprintf("v1/places/10/%d/0", i), tile); err != nil {
			t.Fatal(err)
		}
		if h.mem.bytes > bound {
			t.Fatalf("after %d tiles the process holds %d bytes, bound %d", i+1, h.mem.bytes, bound)
		}
	}
	held := 0
	for i := range n {
		if _, ok := h.Local(fmt.Sprintf("v1/places/10/%d/0", i)); ok {
			held++
			if i < n-bound/size {
				t.Errorf("tile %d held; only the last %d fit", i, bound/size)
			}
		}
	}
	if held != bound/size {
		t.Errorf("%d tiles held in process, want %d", held, bound/size)
	}
	if _, ok, err := h.Get(ctx, "v1/places/10/0/0"); !ok || err != nil {
		t.Errorf("an evicted tile from Redis: ok=%v err=%v", ok, err)
	}
}

// Readers and writers at once, under -race: every read finds the tile
// stored, or none, never another; the bound holds throughout.
func TestHotConcurrent(t *testing.T) {
	ctx := context.Background()
	const bound = 4000
	h, _, _, _ := newHot(t, bound)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("v1/places/12/%d/0", (g*7+i)%40)
				want := []byte(key)
				if i%3 == 0 {
					if err := h.Set(ctx, key, want); err != nil {
						t.Error(err)
						return
					}
				}
				got, ok, err := h.Get(ctx, key)
				if err != nil || (ok && !bytes.Equal(got, want)) {
					t.Errorf("Get(%s) = %q, %v, %v", key, got, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	h.mem.mu.Lock()
	defer h.mem.mu.Unlock()
	if h.mem.bytes > bound {
		t.Errorf("holds %d bytes, bound %d", h.mem.bytes, bound)
	}
}
