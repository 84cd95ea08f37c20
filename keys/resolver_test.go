package keys_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/keys"
)

// counting is a real Memory store that counts its lookups.
type counting struct {
	*keys.Memory
	lookups atomic.Int64
}

func (c *counting) Lookup(ctx context.Context, hash []byte) (keys.Key, error) {
	c.lookups.Add(1)
	return c.Memory.Lookup(ctx, hash)
}

func TestResolver(t *testing.T) {
	ctx := context.Background()
	const ttl = 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		test func(t *testing.T, s *counting, r *keys.Resolver)
	}{
		{"caches a known key", func(t *testing.T, s *counting, r *keys.Resolver) {
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			for range 3 {
				if got := mustKey(t)(r.Resolve(ctx, secret)); !same(got, k) {
					t.Errorf("resolve = %+v, want %+v", got, k)
				}
			}
			if n := s.lookups.Load(); n != 1 {
				t.Errorf("3 resolves made %d lookups, want 1", n)
			}
		}},
		{"caches an unknown key", func(t *testing.T, s *counting, r *keys.Resolver) {
			for range 3 {
				if k, err := r.Resolve(ctx, "tk_00000000_nope"); !errors.Is(err, keys.ErrUnknown) || k != (keys.Key{}) {
					t.Errorf("resolve unknown = %+v, %v; want ErrUnknown", k, err)
				}
			}
			if n := s.lookups.Load(); n != 1 {
				t.Errorf("3 resolves made %d lookups, want 1", n)
			}
		}},
		{"tells what is cached", func(t *testing.T, s *counting, r *keys.Resolver) {
			_, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			for _, sec := range []string{secret, "tk_00000000_nope"} {
				if r.Cached(sec) {
					t.Errorf("%s cached before any resolve", keys.PrefixOf(sec))
				}
				r.Resolve(ctx, sec)
				if !r.Cached(sec) {
					t.Errorf("%s not cached after a resolve", keys.PrefixOf(sec))
				}
			}
			time.Sleep(ttl)
			if r.Cached(secret) {
				t.Error("still cached a ttl later")
			}
		}},
		{"revocation applies within ttl", func(t *testing.T, s *counting, r *keys.Resolver) {
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			mustKey(t)(r.Resolve(ctx, secret))
			revoked := mustKey(t)(s.Revoke(ctx, k.ID))
			time.Sleep(ttl)
			got, err := r.Resolve(ctx, secret)
			if !errors.Is(err, keys.ErrRevoked) || !same(got, revoked) {
				t.Errorf("resolve a ttl after revoking = %+v, %v; want %+v, ErrRevoked", got, err, revoked)
			}
		}},
		{"a new key is known within ttl", func(t *testing.T, s *counting, r *keys.Resolver) {
			if _, err := r.Resolve(ctx, "demo-free"); !errors.Is(err, keys.ErrUnknown) {
				t.Fatalf("resolve before adding: %v, want ErrUnknown", err)
			}
			k := mustKey(t)(s.Add(ctx, "demo", "free", "demo-free"))
			time.Sleep(ttl)
			if got := mustKey(t)(r.Resolve(ctx, "demo-free")); !same(got, k) {
				t.Errorf("resolve a ttl after adding = %+v, want %+v", got, k)
			}
		}},
		{"bounded", func(t *testing.T, s *counting, r *keys.Resolver) {
			keys.SetCacheSize(r, 3)
			_, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			for i := range 20 {
				mustKey(t)(r.Resolve(ctx, secret))
				if _, err := r.Resolve(ctx, fmt.Sprint("unknown-", i)); !errors.Is(err, keys.ErrUnknown) {
					t.Fatalf("resolve unknown: %v", err)
				}
				if n := keys.CacheLen(r); n > 3 {
					t.Fatalf("cache holds %d entries, want at most 3", n)
				}
			}
		}},
		{"concurrent", func(t *testing.T, s *counting, r *keys.Resolver) {
			keys.SetCacheSize(r, 4)
			var secrets []string
			for i := range 6 {
				_, secret := mustCreate(t)(s.Create(ctx, fmt.Sprint(i), "free"))
				secrets = append(secrets, secret, fmt.Sprint("unknown-", i))
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 300 {
						secret := secrets[(g+i)%len(secrets)]
						_, err := r.Resolve(ctx, secret)
						if known := (g+i)%2 == 0; known && err != nil || !known && !errors.Is(err, keys.ErrUnknown) {
							t.Errorf("resolve %s: %v", keys.PrefixOf(secret), err)
							return
						}
					}
				})
			}
			wg.Wait()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &counting{Memory: keys.NewMemory()}
			tc.test(t, s, keys.NewResolver(s, ttl))
		})
	}
}

// TestResolverPostgres resolves through the Postgres store, and checks that
// an error of the store, here a canceled context, is returned and not
// cached as an unknown key.
func TestResolverPostgres(t *testing.T) {
	ctx := context.Background()
	s := keys.NewPostgres(spatialtest.Migrated(t))
	r := keys.NewResolver(s, time.Minute)
	k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Resolve(canceled, secret); !errors.Is(err, context.Canceled) {
		t.Errorf("resolve with a canceled context: %v, want context.Canceled", err)
	}
	if got := mustKey(t)(r.Resolve(ctx, secret)); !same(got, k) {
		t.Errorf("resolve = %+v, want %+v", got, k)
	}
	if _, err := r.Resolve(ctx, "demo-free"); !errors.Is(err, keys.ErrUnknown) {
		t.Errorf("resolve unknown: %v, want ErrUnknown", err)
	}
}
