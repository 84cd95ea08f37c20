package keys_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
)

// counting is a real store that counts its lookups.
type counting struct {
	store
	lookups atomic.Int64
}

func (c *counting) LookupEntry(ctx context.Context, hash []byte) (keys.Entry, error) {
	c.lookups.Add(1)
	return c.store.LookupEntry(ctx, hash)
}

func (c *counting) Changed(ctx context.Context, since time.Time) ([]keys.Entry, error) {
	return c.store.(interface {
		Changed(context.Context, time.Time) ([]keys.Entry, error)
	}).Changed(ctx, since)
}

func TestIndex(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds(t) {
		for _, tc := range []struct {
			name string
			test func(t *testing.T, s *counting, x *keys.Index)
		}{
			{"a refresh indexes every key", func(t *testing.T, s *counting, x *keys.Index) {
				k1, secret1 := mustCreate(t)(s.Create(ctx, "a", "free"))
				k2, secret2 := mustCreate(t)(s.Create(ctx, "b", "pro"))
				revoked := mustKey(t)(s.Revoke(ctx, k2.ID))
				if _, err := x.Find(secret1); !errors.Is(err, keys.ErrNotIndexed) {
					t.Fatalf("find before any refresh: %v, want ErrNotIndexed", err)
				}
				mustRefresh(t, x)
				if got := mustKey(t)(x.Find(secret1)); !same(got, k1) {
					t.Errorf("find = %+v, want %+v", got, k1)
				}
				if got, err := x.Find(secret2); !errors.Is(err, keys.ErrRevoked) || !same(got, revoked) {
					t.Errorf("find revoked = %+v, %v; want %+v, ErrRevoked", got, err, revoked)
				}
				if n := s.lookups.Load(); n != 0 {
					t.Errorf("%d lookups, want none", n)
				}
			}},
			{"FindByID answers from memory, with the latest version", func(t *testing.T, s *counting, x *keys.Index) {
				k, _ := mustCreate(t)(s.Create(ctx, "a", "free"))
				if _, err := x.FindByID(k.ID); !errors.Is(err, keys.ErrNotIndexed) {
					t.Fatalf("find by id before any refresh: %v, want ErrNotIndexed", err)
				}
				mustRefresh(t, x)
				if got := mustKey(t)(x.FindByID(k.ID)); !same(got, k) {
					t.Errorf("find by id = %+v, want %+v", got, k)
				}
				moved := mustKey(t)(s.SetPlan(ctx, k.ID, "pro"))
				mustRefresh(t, x)
				if got := mustKey(t)(x.FindByID(k.ID)); got.Plan != "pro" || !same(got, moved) {
					t.Errorf("find by id after a change = %+v, want %+v", got, moved)
				}
				revoked := mustKey(t)(s.Revoke(ctx, k.ID))
				mustRefresh(t, x)
				if got, err := x.FindByID(k.ID); !errors.Is(err, keys.ErrRevoked) || !same(got, revoked) {
					t.Errorf("find by id revoked = %+v, %v; want %+v, ErrRevoked", got, err, revoked)
				}
				if _, err := x.FindByID(k.ID + 1000); !errors.Is(err, keys.ErrNotIndexed) {
					t.Errorf("find by an id no key has: %v, want ErrNotIndexed", err)
				}
				if n := s.lookups.Load(); n != 0 {
					t.Errorf("%d lookups, want none", n)
				}
			}},
			{"each version taken in is told, before Find returns it", func(t *testing.T, s *counting, x *keys.Index) {
				k, secret := mustCreate(t)(s.Create(ctx, "a", "free"))
				other, otherSecret := mustCreate(t)(s.Create(ctx, "b", "free"))
				secrets := map[int64]string{k.ID: secret, other.ID: otherSecret}
				var told []keys.Key
				x.OnChange(func(k keys.Key) {
					told = append(told, k)
					if got, err := x.Find(secrets[k.ID]); err == nil && got.UpdatedAt.Equal(k.UpdatedAt) {
						t.Errorf("Find returned key %d's version before it was told", k.ID)
					}
				})
				mustRefresh(t, x)
				moved := mustKey(t)(s.SetPlan(ctx, k.ID, "pro"))
				mustRefresh(t, x)
				// A key the index does not hold yet, found by Lookup.
				mustKey(t)(s.SetPlan(ctx, other.ID, "pro"))
				fresh, freshSecret := mustCreate(t)(s.Create(ctx, "c", "free"))
				secrets[fresh.ID] = freshSecret
				mustKey(t)(x.Lookup(ctx, freshSecret))
				var plans []string
				for _, k := range told {
					plans = append(plans, fmt.Sprintf("%d:%s", k.ID, k.Plan))
				}
				want := []string{fmt.Sprintf("%d:free", k.ID), fmt.Sprintf("%d:free", other.ID), fmt.Sprintf("%d:pro", moved.ID), fmt.Sprintf("%d:free", fresh.ID)}
				if fmt.Sprint(plans) != fmt.Sprint(want) {
					t.Errorf("told %v, want %v", plans, want)
				}
			}},
			{"a refresh reads changes", func(t *testing.T, s *counting, x *keys.Index) {
				k, secret := mustCreate(t)(s.Create(ctx, "a", "free"))
				mustRefresh(t, x)
				moved := mustKey(t)(s.SetPlan(ctx, k.ID, "pro"))
				_, newSecret := mustCreate(t)(s.Create(ctx, "b", "free"))
				mustRefresh(t, x)
				if got := mustKey(t)(x.Find(secret)); got.Plan != "pro" || !same(got, moved) {
					t.Errorf("find after a plan change = %+v, want %+v", got, moved)
				}
				mustKey(t)(x.Find(newSecret))
				mustKey(t)(s.Revoke(ctx, k.ID))
				mustRefresh(t, x)
				if _, err := x.Find(secret); !errors.Is(err, keys.ErrRevoked) {
					t.Errorf("find after revoking: %v, want ErrRevoked", err)
				}
			}},
			{"lookup finds a key made since the refresh", func(t *testing.T, s *counting, x *keys.Index) {
				mustRefresh(t, x)
				k, secret := mustCreate(t)(s.Create(ctx, "a", "free"))
				if got := mustKey(t)(x.Lookup(ctx, secret)); !same(got, k) {
					t.Errorf("lookup = %+v, want %+v", got, k)
				}
				if got := mustKey(t)(x.Find(secret)); !same(got, k) {
					t.Errorf("find after lookup = %+v, want %+v", got, k)
				}
			}},
			{"an unknown key is remembered, then forgotten once it exists", func(t *testing.T, s *counting, x *keys.Index) {
				for range 3 {
					if _, err := x.Find("demo-free"); errors.Is(err, keys.ErrNotIndexed) {
						if _, err := x.Lookup(ctx, "demo-free"); !errors.Is(err, keys.ErrUnknown) {
							t.Fatalf("lookup unknown: %v, want ErrUnknown", err)
						}
					} else if !errors.Is(err, keys.ErrUnknown) {
						t.Fatalf("find unknown: %v, want ErrUnknown", err)
					}
				}
				if n := s.lookups.Load(); n != 1 {
					t.Errorf("%d lookups of one unknown key, want 1", n)
				}
				k := mustKey(t)(s.Add(ctx, "demo", "free", "demo-free"))
				mustRefresh(t, x)
				if got := mustKey(t)(x.Find("demo-free")); !same(got, k) {
					t.Errorf("find once added = %+v, want %+v", got, k)
				}
			}},
			{"unknown keys are bounded", func(t *testing.T, s *counting, x *keys.Index) {
				for i := range keys.CacheSize + 50 {
					if _, err := x.Lookup(ctx, fmt.Sprint("made-up-", i)); !errors.Is(err, keys.ErrUnknown) {
						t.Fatalf("lookup: %v", err)
					}
				}
				if n := keys.UnknownLen(x); n > keys.CacheSize {
					t.Errorf("remembers %d unknown keys, want at most %d", n, keys.CacheSize)
				}
			}},
			{"refresh if older shares one refresh", func(t *testing.T, s *counting, x *keys.Index) {
				mustRefresh(t, x)
				_, secret := mustCreate(t)(s.Create(ctx, "a", "free"))
				if err := x.RefreshIfOlder(ctx, time.Hour); err != nil {
					t.Fatal(err)
				}
				if _, err := x.Find(secret); !errors.Is(err, keys.ErrNotIndexed) {
					t.Errorf("find after a skipped refresh: %v, want ErrNotIndexed", err)
				}
				if err := x.RefreshIfOlder(ctx, 0); err != nil {
					t.Fatal(err)
				}
				mustKey(t)(x.Find(secret))
			}},
			{"concurrent", func(t *testing.T, s *counting, x *keys.Index) {
				var secrets []string
				for i := range 6 {
					_, secret := mustCreate(t)(s.Create(ctx, fmt.Sprint(i), "free"))
					secrets = append(secrets, secret, fmt.Sprint("unknown-", i))
				}
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Go(func() {
						for i := range 200 {
							if g == 0 && i%50 == 0 {
								if err := x.Refresh(ctx); err != nil {
									t.Error(err)
									return
								}
							}
							secret := secrets[(g+i)%len(secrets)]
							_, err := x.Find(secret)
							if errors.Is(err, keys.ErrNotIndexed) {
								_, err = x.Lookup(ctx, secret)
							}
							if known := (g+i)%2 == 0; known && err != nil || !known && !errors.Is(err, keys.ErrUnknown) {
								t.Errorf("find %s: %v", keys.PrefixOf(secret), err)
								return
							}
						}
					})
				}
				wg.Wait()
			}},
		} {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				s := &counting{store: kind.newStore(t)}
				tc.test(t, s, keys.NewIndex(s, time.Minute))
			})
		}
	}
}

// TestIndexStoreFailure checks that a failing store, here a canceled
// context, is reported as ErrUnavailable and remembered as nothing.
func TestIndexStoreFailure(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds(t) {
		if kind.name != "postgres" {
			continue
		}
		s := kind.newStore(t)
		x := keys.NewIndex(s.(*keys.Postgres), time.Minute)
		k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := x.Lookup(canceled, secret); !errors.Is(err, keys.ErrUnavailable) {
			t.Errorf("lookup with a canceled context: %v, want ErrUnavailable", err)
		}
		if err := x.Refresh(canceled); !errors.Is(err, keys.ErrUnavailable) {
			t.Errorf("refresh with a canceled context: %v, want ErrUnavailable", err)
		}
		if _, err := x.Find(secret); !errors.Is(err, keys.ErrNotIndexed) {
			t.Errorf("find after failures: %v, want ErrNotIndexed", err)
		}
		if got := mustKey(t)(x.Lookup(ctx, secret)); !same(got, k) {
			t.Errorf("lookup = %+v, want %+v", got, k)
		}
	}
}

func mustRefresh(t *testing.T, x *keys.Index) {
	t.Helper()
	if err := x.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}
