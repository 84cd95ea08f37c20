package tilecache

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultHotBytes is how many bytes of tiles a Hot cache keeps in process
// by default: some thousands of the tiles asked for most.
const DefaultHotBytes = 64 << 20

// Hot is a cache in Redis with the tiles asked for most also kept in
// process, least recently used first out past a bound in bytes. A tile
// held in process is served with no round trip, and known to be a hit
// before anything is asked of Redis (Local), so it can be charged its hit
// price straight away.
//
// A tile is kept in process no longer than Redis keeps it: for what its
// key has left to live in Redis when read from there (PTTL, sent in the
// same round trip as the GET), for the cache's TTL when stored by this
// process. So the copy in process is never older than the one Redis would
// serve under the same key, and the keys carry the data version: a
// version the server has not seen yet misses both alike.
type Hot struct {
	redis *Redis
	mem   *Memory
}

// NewHot returns r with at most maxBytes of tiles kept in process too.
func NewHot(r *Redis, maxBytes int) *Hot {
	return &Hot{redis: r, mem: NewMemory(maxBytes, r.ttl)}
}

// Local returns the tile under key and whether the process holds it, with
// no I/O.
func (h *Hot) Local(key string) ([]byte, bool) {
	tile, ok, _ := h.mem.Get(context.Background(), key)
	return tile, ok
}

// Get returns the tile under key from the process, else from Redis, and
// then keeps it in process. Its only errors are Redis's, wrapped.
func (h *Hot) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if tile, ok := h.Local(key); ok {
		return tile, true, nil
	}
	r := h.Along(key)
	pipe := h.redis.client.Pipeline()
	for _, cmd := range r.Cmds() {
		_ = pipe.Process(ctx, cmd) // queued; the errors come with Exec
	}
	_, _ = pipe.Exec(ctx) // each command's error is in its result
	return r.Result()
}

// Along returns a read of key to send with another command, as Redis's
// does; a tile it finds is kept in process.
func (h *Hot) Along(key string) *Read {
	r := h.redis.Along(key)
	r.ttl = redis.NewDurationCmd(context.Background(), time.Millisecond, "pttl", h.redis.prefix+key)
	r.keep = func(tile []byte, left time.Duration) {
		if left == -1 { // no expiry in Redis: the cache's own TTL
			left = h.mem.ttl
		}
		h.mem.setFor(key, tile, min(left, h.mem.ttl)) // gone (-2) or failed (0): not kept
	}
	return r
}

// Set stores tile under key in process and in Redis. Its only errors are
// Redis's, wrapped.
func (h *Hot) Set(ctx context.Context, key string, tile []byte) error {
	h.mem.setFor(key, tile, h.mem.ttl)
	return h.redis.Set(ctx, key, tile)
}
