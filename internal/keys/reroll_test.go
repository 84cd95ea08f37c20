package keys_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
)

// TestReroll rerolls keys in each store and checks what the store and an
// index make of the old and new secrets.
func TestReroll(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			s := kind.newStore(t)
			x := keys.NewIndex(s, time.Minute)
			k, old := mustCreate(t)(s.CreateKind(ctx, keys.Publishable, "web", "free", 0))
			k = mustKey(t)(s.SetOverrides(ctx, k.ID, []byte(`{"max_in_flight": 2}`)))
			mustRefresh(t, x)

			r, secret, err := s.Reroll(ctx, k.ID, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if secret == old || !keys.Plausible(secret) || !keys.Declares(secret, keys.Publishable) || r.Prefix != keys.PrefixOf(secret) {
				t.Fatalf("rerolled to %q (prefix %s), from %q: want a new publishable secret", secret, r.Prefix, old)
			}
			if r.ID != k.ID || r.Plan != k.Plan || r.Name != k.Name || !sameJSON(t, r.Overrides, `{"max_in_flight": 2}`) || r.Kind() != keys.Publishable {
				t.Errorf("rerolled %+v, from %+v: want the same key", r, k)
			}
			if until := time.Until(r.PreviousValidUntil); until < 59*time.Minute || until > time.Hour {
				t.Errorf("previous valid until %v, want in an hour", r.PreviousValidUntil)
			}
			for _, sec := range []string{old, secret} {
				e, err := s.LookupEntry(ctx, keys.Hash(sec))
				if err != nil || e.Key.ID != k.ID {
					t.Fatalf("store lookup of %s: %+v, %v", keys.PrefixOf(sec), e, err)
				}
				if string(e.Hash) != string(keys.Hash(secret)) || string(e.Previous) != string(keys.Hash(old)) {
					t.Errorf("entry of %s: hashes %x, %x", keys.PrefixOf(sec), e.Hash, e.Previous)
				}
			}
			// Before the index refreshes, the old secret is the key's.
			if got := mustKey(t)(x.Find(old)); got.Prefix != k.Prefix {
				t.Errorf("find old before refresh: %+v", got)
			}
			if _, err := x.Find(secret); !errors.Is(err, keys.ErrNotIndexed) {
				t.Errorf("find new before refresh: %v, want ErrNotIndexed", err)
			}
			mustRefresh(t, x)
			for _, sec := range []string{old, secret} {
				if got := mustKey(t)(x.Find(sec)); got.Prefix != r.Prefix || got.ID != k.ID {
					t.Errorf("find %s during the overlap: %+v", keys.PrefixOf(sec), got)
				}
			}
			if x.Len() != 1 {
				t.Errorf("index holds %d keys, want 1", x.Len())
			}

			// A second reroll, with no overlap: the first secret is
			// forgotten, the second refused at once, the third works.
			r2, third, err := s.Reroll(ctx, k.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			mustRefresh(t, x)
			if _, err := x.Find(old); !errors.Is(err, keys.ErrNotIndexed) {
				t.Errorf("find first secret after two rerolls: %v, want ErrNotIndexed", err)
			}
			if _, err := s.Lookup(ctx, keys.Hash(old)); !errors.Is(err, keys.ErrUnknown) {
				t.Errorf("store lookup of the first secret after two rerolls: %v, want ErrUnknown", err)
			}
			if got, err := x.Find(secret); !errors.Is(err, keys.ErrRotated) || got.ID != k.ID {
				t.Errorf("find second secret after a reroll with no overlap: %+v, %v; want the key, ErrRotated", got, err)
			}
			if got := mustKey(t)(x.Find(third)); got.Prefix != r2.Prefix {
				t.Errorf("find third secret: %+v", got)
			}
			// A fresh index finds the same by lookup.
			y := keys.NewIndex(s, time.Minute)
			if _, err := y.Lookup(ctx, secret); !errors.Is(err, keys.ErrRotated) {
				t.Errorf("lookup of the rotated secret: %v, want ErrRotated", err)
			}
			if got := mustKey(t)(y.Find(third)); got.ID != k.ID {
				t.Errorf("find third after the lookup of the second: %+v", got)
			}
			if _, _, err := s.Reroll(ctx, k.ID+1, time.Hour); !errors.Is(err, keys.ErrNotFound) {
				t.Errorf("reroll of no key: %v, want ErrNotFound", err)
			}

			// A key of the old form and a hand-picked one reroll to secret
			// keys.
			demo := mustKey(t)(s.Add(ctx, "demo", "free", "demo-free"))
			_, demoNew, err := s.Reroll(ctx, demo.ID, time.Hour)
			if err != nil || !keys.Declares(demoNew, keys.Secret) {
				t.Errorf("reroll of a demo key: %q, %v; want a secret key", demoNew, err)
			}
			// Registered again (a restart with the same demo keys), the
			// demo secret is a new key, and stands for it.
			again := mustKey(t)(s.Add(ctx, "demo", "free", "demo-free"))
			if again.ID == demo.ID {
				t.Errorf("demo key added again after a reroll is key %d, want a new one", again.ID)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash("demo-free"))); got.ID != again.ID {
				t.Errorf("lookup of the demo secret: key %d, want %d", got.ID, again.ID)
			}
			mustRefresh(t, x)
			if got := mustKey(t)(x.Find("demo-free")); got.ID != again.ID {
				t.Errorf("find the demo secret: key %d, want %d", got.ID, again.ID)
			}
		})
	}
}

// TestIndexExpiry checks that an expired key is found with ErrExpired, by
// Find and by Lookup, and works again once its expiry is cleared.
func TestIndexExpiry(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			s := kind.newStore(t)
			x := keys.NewIndex(s, time.Minute)
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
			mustKey(t)(s.SetExpiry(ctx, k.ID, at))
			got, err := x.Lookup(ctx, secret)
			if !errors.Is(err, keys.ErrExpired) || !got.ExpiresAt.Equal(at) {
				t.Errorf("lookup of an expired key: %+v, %v; want it with ErrExpired", got, err)
			}
			if got, err := x.Find(secret); !errors.Is(err, keys.ErrExpired) || got.ID != k.ID {
				t.Errorf("find an expired key: %+v, %v; want it with ErrExpired", got, err)
			}
			mustKey(t)(s.SetExpiry(ctx, k.ID, time.Now().Add(time.Hour)))
			mustRefresh(t, x)
			mustKey(t)(x.Find(secret))
			// Revocation wins over expiry.
			mustKey(t)(s.SetExpiry(ctx, k.ID, at))
			mustKey(t)(s.Revoke(ctx, k.ID))
			mustRefresh(t, x)
			if _, err := x.Find(secret); !errors.Is(err, keys.ErrRevoked) {
				t.Errorf("find a revoked, expired key: %v, want ErrRevoked", err)
			}
			if !strings.Contains(keys.ErrExpired.Error(), "expired") {
				t.Error(keys.ErrExpired)
			}
		})
	}
}
