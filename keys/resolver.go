package keys

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// CacheSize is the most keys a Resolver caches, known and unknown together.
// When it is full a new entry replaces a random one, so a flood of made-up
// keys costs memory no more than this.
const CacheSize = 10_000

// lookuper is the store a Resolver reads: a *Postgres or a *Memory.
type lookuper interface {
	Lookup(ctx context.Context, hash []byte) (Key, error)
}

// Resolver turns a presented secret into its Key through an in-process
// cache, so that a request costs no round trip to the store. Found and
// unknown keys alike are cached for the ttl given to NewResolver, so a
// revoked key stops working, a new one starts and a plan change applies
// within ttl. It is safe for concurrent use.
type Resolver struct {
	store lookuper
	ttl   time.Duration
	max   int

	mu    sync.Mutex
	cache map[string]entry // by string(Hash(secret)): the secret is not kept
}

// entry is one cached lookup.
type entry struct {
	key     Key
	found   bool
	expires time.Time
}

// NewResolver returns a Resolver reading store (a *Postgres or a *Memory)
// and caching each answer for ttl; with a ttl of zero or less it caches
// nothing.
func NewResolver(store lookuper, ttl time.Duration) *Resolver {
	return &Resolver{store: store, ttl: ttl, max: CacheSize, cache: make(map[string]entry)}
}

// Resolve returns the key whose secret was presented. It returns
// ErrUnknown if there is none, and the key with ErrRevoked if it has been
// revoked. An error of the store is returned, wrapped, and not cached.
func (r *Resolver) Resolve(ctx context.Context, secret string) (Key, error) {
	h := string(Hash(secret))
	start := time.Now()
	r.mu.Lock()
	e, ok := r.cache[h]
	r.mu.Unlock()
	if !ok || !start.Before(e.expires) {
		k, err := r.store.Lookup(ctx, []byte(h))
		if err != nil && !errors.Is(err, ErrUnknown) {
			return Key{}, fmt.Errorf("keys: resolve %s: %w", PrefixOf(secret), err)
		}
		// The entry expires ttl after the lookup began, so it never
		// outlives by more than ttl a change committed while it ran.
		e = entry{key: k, found: err == nil, expires: start.Add(r.ttl)}
		r.put(h, e)
	}
	switch {
	case !e.found:
		return Key{}, ErrUnknown
	case e.key.Revoked():
		return e.key, ErrRevoked
	}
	return e.key, nil
}

// Cached reports whether Resolve would answer for secret from the cache,
// without a lookup in the store.
func (r *Resolver) Cached(secret string) bool {
	h := string(Hash(secret))
	r.mu.Lock()
	e, ok := r.cache[h]
	r.mu.Unlock()
	return ok && time.Now().Before(e.expires)
}

// put caches e under h, first evicting a random entry if the cache is
// full.
func (r *Resolver) put(h string, e entry) {
	if r.ttl <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cache[h]; !ok && len(r.cache) >= r.max {
		for old := range r.cache { // map iteration starts at random
			delete(r.cache, old)
			break
		}
	}
	r.cache[h] = e
}
