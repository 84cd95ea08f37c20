// Package tilecache holds rendered tiles for a while, so a tile asked for
// again is served without touching the database: in Redis, shared by every
// server, in process, or in Redis with the hot tiles in process too (Hot).
package tilecache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTTL is how long a tile stays cached by default. Keys carry the
// data version, so a new load never serves an old tile; the TTL only bounds
// memory.
const DefaultTTL = time.Hour

// rediser is what Redis needs of a client.
type rediser interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Pipeline() redis.Pipeliner // for Hot's GET and PTTL in one trip
}

// Redis caches tiles in Redis under a prefix, each for ttl.
type Redis struct {
	client rediser
	prefix string
	ttl    time.Duration
}

// NewRedis returns a cache in client; keys start with prefix.
func NewRedis(client rediser, prefix string, ttl time.Duration) *Redis {
	return &Redis{client: client, prefix: prefix, ttl: ttl}
}

// Get returns the tile stored under key, and whether there was one: a miss
// is not an error. Its only errors are Redis's, wrapped.
func (c *Redis) Get(ctx context.Context, key string) ([]byte, bool, error) {
	return result(c.client.Get(ctx, c.prefix+key))
}

// Along returns a read of key for the caller to send with another command
// in one round trip (quota.Redis.ChargeWith sends it with a charge): the
// commands to send and, once they went, the result. It fits only a caller
// whose commands go to the cache's own Redis.
func (c *Redis) Along(key string) *Read {
	return &Read{get: c.getCmd(key)}
}

func (c *Redis) getCmd(key string) *redis.StringCmd {
	return redis.NewStringCmd(context.Background(), "get", c.prefix+key)
}

// Read is a tile lookup sent along with another command (see Along).
type Read struct {
	get *redis.StringCmd
	// With a Hot cache: the tile's time to live, read in the same trip,
	// and where a tile found is kept in process.
	ttl  *redis.DurationCmd
	keep func(tile []byte, ttl time.Duration)
}

// Cmds are the commands to send.
func (r *Read) Cmds() []redis.Cmder {
	if r.ttl == nil {
		return []redis.Cmder{r.get}
	}
	return []redis.Cmder{r.get, r.ttl}
}

// Result returns the tile, and whether there was one, once the commands
// went.
func (r *Read) Result() ([]byte, bool, error) {
	tile, ok, err := result(r.get)
	if ok && r.keep != nil {
		r.keep(tile, r.ttl.Val())
	}
	return tile, ok, err
}

func result(cmd *redis.StringCmd) ([]byte, bool, error) {
	b, err := cmd.Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("tilecache: get: %w", err)
	}
	return b, true, nil
}

// Set stores tile under key. Its only errors are Redis's, wrapped.
func (c *Redis) Set(ctx context.Context, key string, tile []byte) error {
	if err := c.client.Set(ctx, c.prefix+key, tile, c.ttl).Err(); err != nil {
		return fmt.Errorf("tilecache: set: %w", err)
	}
	return nil
}

// Memory caches tiles in process, least recently used first out once their
// total size passes a bound. Its bound counts the tiles' bytes, not the
// bookkeeping of each (a key and about 150 bytes).
type Memory struct {
	maxBytes int
	ttl      time.Duration
	now      func() time.Time

	mu    sync.Mutex
	bytes int
	order *list.List // of *entry, most recently used first
	byKey map[string]*list.Element
}

type entry struct {
	key     string
	tile    []byte
	expires time.Time
}

// NewMemory returns an in-process cache of at most maxBytes of tiles, each
// kept for ttl.
func NewMemory(maxBytes int, ttl time.Duration) *Memory {
	return &Memory{maxBytes: maxBytes, ttl: ttl, now: time.Now, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the tile stored under key, and whether there was one. It
// never fails.
func (c *Memory) Get(_ context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil, false, nil
	}
	e := el.Value.(*entry)
	if !c.now().Before(e.expires) {
		c.remove(el)
		return nil, false, nil
	}
	c.order.MoveToFront(el)
	return e.tile, true, nil
}

// Set stores tile under key; a tile larger than the whole cache is not kept.
// It never fails.
func (c *Memory) Set(_ context.Context, key string, tile []byte) error {
	c.setFor(key, tile, c.ttl)
	return nil
}

// setFor stores tile under key for ttl.
func (c *Memory) setFor(key string, tile []byte, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
	if len(tile) > c.maxBytes || ttl <= 0 {
		return
	}
	c.byKey[key] = c.order.PushFront(&entry{key: key, tile: tile, expires: c.now().Add(ttl)})
	c.bytes += len(tile)
	for c.bytes > c.maxBytes {
		c.remove(c.order.Back())
	}
}

func (c *Memory) remove(el *list.Element) {
	e := c.order.Remove(el).(*entry)
	delete(c.byKey, e.key)
	c.bytes -= len(e.tile)
}
