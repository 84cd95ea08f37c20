package keys_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// store is the method set that Postgres and Memory share.
type store interface {
	Create(ctx context.Context, name, plan string) (keys.Key, string, error)
	Add(ctx context.Context, name, plan, secret string) (keys.Key, error)
	Lookup(ctx context.Context, hash []byte) (keys.Key, error)
	LookupEntry(ctx context.Context, hash []byte) (keys.Entry, error)
	CreateKind(ctx context.Context, kind keys.Kind, name, plan string, customerID int64) (keys.Key, string, error)
	Reroll(ctx context.Context, id int64, overlap time.Duration) (keys.Key, string, error)
	Changed(ctx context.Context, since time.Time) ([]keys.Entry, error)
	List(ctx context.Context) ([]keys.Key, error)
	Get(ctx context.Context, id int64) (keys.Key, error)
	Revoke(ctx context.Context, id int64) (keys.Key, error)
	SetPlan(ctx context.Context, id int64, plan string) (keys.Key, error)
	SetOverrides(ctx context.Context, id int64, overrides []byte) (keys.Key, error)
	SetRestrictions(ctx context.Context, id int64, restrictions []byte) (keys.Key, error)
	SetExpiry(ctx context.Context, id int64, at time.Time) (keys.Key, error)
	SetCustomer(ctx context.Context, id, customerID int64) (keys.Key, error)
	CreateCustomer(ctx context.Context, name, plan string) (keys.Customer, error)
	GetCustomer(ctx context.Context, id int64) (keys.Customer, error)
	ListCustomers(ctx context.Context) ([]keys.Customer, error)
	ChangedCustomers(ctx context.Context, since time.Time) ([]keys.Customer, error)
	SetCustomerPlan(ctx context.Context, id int64, plan string) (keys.Customer, error)
	RenameCustomer(ctx context.Context, id int64, name string) (keys.Customer, error)
}

var (
	_ store = (*keys.Postgres)(nil)
	_ store = (*keys.Memory)(nil)
)

// kind is a kind of store, with a function that makes an empty one.
type kind struct {
	name     string
	newStore func(t *testing.T) store
}

// kinds returns the kinds of store; the Postgres stores share one migrated
// schema of their own, emptied each time.
func kinds(t *testing.T) []kind {
	pool := spatialtest.Migrated(t)
	return []kind{
		{"memory", func(*testing.T) store { return keys.NewMemory() }},
		{"postgres", func(t *testing.T) store {
			if _, err := pool.Exec(context.Background(), "TRUNCATE api_keys, customers RESTART IDENTITY"); err != nil {
				t.Fatal(err)
			}
			return keys.NewPostgres(pool)
		}},
	}
}

// same reports whether a and b are the same record.
func same(a, b keys.Key) bool {
	return a.ID == b.ID && a.Prefix == b.Prefix && a.Name == b.Name && a.Plan == b.Plan &&
		a.CreatedAt.Equal(b.CreatedAt) && a.RevokedAt.Equal(b.RevokedAt) && a.CustomerID == b.CustomerID
}

// sameJSON reports whether got is the JSON want, whatever its spacing.
func sameJSON(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Errorf("%q: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

// mustKey returns a function that fails t on an error and returns the key.
func mustKey(t *testing.T) func(keys.Key, error) keys.Key {
	return func(k keys.Key, err error) keys.Key {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
}

// mustCreate is mustKey for Create's key and secret.
func mustCreate(t *testing.T) func(keys.Key, string, error) (keys.Key, string) {
	return func(k keys.Key, secret string, err error) (keys.Key, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return k, secret
	}
}

// mustList is mustKey for List.
func mustList(t *testing.T) func([]keys.Key, error) []keys.Key {
	return func(ks []keys.Key, err error) []keys.Key {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
}

func TestStores(t *testing.T) {
	ctx := context.Background()
	kinds := kinds(t)
	for _, tc := range []struct {
		name string
		test func(t *testing.T, s store)
	}{
		{"create", func(t *testing.T, s store) {
			before := time.Now().Add(-time.Second)
			k, secret, err := s.Create(ctx, "ci", "free")
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != 1 || k.Prefix != keys.PrefixOf(secret) || k.Name != "ci" || k.Plan != "free" || k.Revoked() {
				t.Errorf("created %+v", k)
			}
			if k.CreatedAt.Before(before) || k.CreatedAt.After(time.Now().Add(time.Second)) {
				t.Errorf("created at %v, want about now", k.CreatedAt)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); !same(got, k) {
				t.Errorf("lookup = %+v, want %+v", got, k)
			}
			k2, secret2 := mustCreate(t)(s.Create(ctx, "", "pro"))
			if k2.ID != 2 || secret2 == secret || k2.Prefix == k.Prefix {
				t.Errorf("second key %+v (secret %s), first %+v", k2, keys.PrefixOf(secret2), k)
			}
		}},
		{"add is idempotent", func(t *testing.T, s store) {
			k := mustKey(t)(s.Add(ctx, "demo", "free", "demo-free"))
			if k.Prefix != "demo…" || k.Name != "demo" || k.Plan != "free" {
				t.Errorf("added %+v", k)
			}
			if again := mustKey(t)(s.Add(ctx, "other", "pro", "demo-free")); !same(again, k) {
				t.Errorf("adding again = %+v, want the first %+v unchanged", again, k)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash("demo-free"))); !same(got, k) {
				t.Errorf("lookup = %+v, want %+v", got, k)
			}
			if ks := mustList(t)(s.List(ctx)); len(ks) != 1 {
				t.Errorf("list = %+v, want one key", ks)
			}
		}},
		{"concurrent adds of one secret make one key", func(t *testing.T, s store) {
			ids := make([]int64, 8)
			var wg sync.WaitGroup
			for i := range ids {
				wg.Go(func() {
					k, err := s.Add(ctx, "demo", "free", "demo-free")
					if err != nil {
						t.Error(err)
					}
					ids[i] = k.ID
				})
			}
			wg.Wait()
			for _, id := range ids {
				if id != ids[0] || id == 0 {
					t.Fatalf("ids %v, want one id", ids)
				}
			}
			if ks := mustList(t)(s.List(ctx)); len(ks) != 1 {
				t.Errorf("list = %+v, want one key", ks)
			}
		}},
		{"lookup unknown", func(t *testing.T, s store) {
			mustKey(t)(s.Add(ctx, "demo", "free", "demo-free"))
			for _, h := range [][]byte{keys.Hash("demo-pro"), keys.Hash(""), nil, []byte("demo-free")} {
				if _, err := s.Lookup(ctx, h); !errors.Is(err, keys.ErrUnknown) {
					t.Errorf("lookup %x: %v, want ErrUnknown", h, err)
				}
			}
		}},
		{"list by id", func(t *testing.T, s store) {
			if ks := mustList(t)(s.List(ctx)); len(ks) != 0 {
				t.Errorf("empty store lists %+v", ks)
			}
			var want []keys.Key
			for _, name := range []string{"c", "a", "b"} {
				k, _ := mustCreate(t)(s.Create(ctx, name, "free"))
				want = append(want, k)
			}
			want[1] = mustKey(t)(s.Revoke(ctx, want[1].ID))
			got := mustList(t)(s.List(ctx))
			if len(got) != len(want) {
				t.Fatalf("list = %+v, want %+v", got, want)
			}
			for i := range got {
				if !same(got[i], want[i]) {
					t.Errorf("list[%d] = %+v, want %+v", i, got[i], want[i])
				}
			}
		}},
		{"get", func(t *testing.T, s store) {
			k, _ := mustCreate(t)(s.Create(ctx, "ci", "free"))
			if got := mustKey(t)(s.Get(ctx, k.ID)); !same(got, k) {
				t.Errorf("get = %+v, want %+v", got, k)
			}
		}},
		{"revoke is idempotent", func(t *testing.T, s store) {
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			r := mustKey(t)(s.Revoke(ctx, k.ID))
			if !r.Revoked() || r.RevokedAt.Before(k.CreatedAt) {
				t.Fatalf("revoked %+v, created %v", r, k.CreatedAt)
			}
			if k.RevokedAt = r.RevokedAt; !same(r, k) {
				t.Errorf("revoke changed more than RevokedAt: %+v, was %+v", r, k)
			}
			// Once the clock is past the revocation, one made again would
			// be later.
			for !time.Now().Truncate(time.Microsecond).After(r.RevokedAt) {
				runtime.Gosched()
			}
			if again := mustKey(t)(s.Revoke(ctx, k.ID)); !same(again, r) {
				t.Errorf("revoking again = %+v, want %+v unchanged", again, r)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); !same(got, r) {
				t.Errorf("lookup of a revoked key = %+v, want %+v", got, r)
			}
			if got := mustKey(t)(s.Get(ctx, k.ID)); !same(got, r) {
				t.Errorf("get of a revoked key = %+v, want %+v", got, r)
			}
		}},
		{"set plan", func(t *testing.T, s store) {
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			p := mustKey(t)(s.SetPlan(ctx, k.ID, "pro"))
			if k.Plan = "pro"; !same(p, k) {
				t.Errorf("set plan = %+v, want %+v", p, k)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); !same(got, k) {
				t.Errorf("lookup after set plan = %+v, want %+v", got, k)
			}
		}},
		{"set overrides", func(t *testing.T, s store) {
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			const o = `{"limits": [{"max": 500, "name": "burst", "window": "5s"}]}`
			set := mustKey(t)(s.SetOverrides(ctx, k.ID, []byte(o)))
			if !same(set, k) || !sameJSON(t, set.Overrides, o) || !set.UpdatedAt.After(k.UpdatedAt) {
				t.Errorf("set overrides = %+v, want %+v with %s and a later UpdatedAt", set, k, o)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); !sameJSON(t, got.Overrides, o) {
				t.Errorf("lookup after set overrides: %s", got.Overrides)
			}
			if got := mustKey(t)(s.SetOverrides(ctx, k.ID, nil)); got.Overrides != nil {
				t.Errorf("cleared overrides: %s, want none", got.Overrides)
			}
			if _, err := s.SetOverrides(ctx, k.ID+1, []byte(o)); !errors.Is(err, keys.ErrNotFound) {
				t.Errorf("set overrides of no key: %v, want ErrNotFound", err)
			}
		}},
		{"set restrictions", func(t *testing.T, s store) {
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			const r = `{"origins": ["https://*.example.com"], "networks": ["10.0.0.0/8"]}`
			set := mustKey(t)(s.SetRestrictions(ctx, k.ID, []byte(r)))
			if !same(set, k) || !sameJSON(t, set.Restrictions, r) || !set.UpdatedAt.After(k.UpdatedAt) {
				t.Errorf("set restrictions = %+v, want %+v with %s and a later UpdatedAt", set, k, r)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); !sameJSON(t, got.Restrictions, r) {
				t.Errorf("lookup after set restrictions: %s", got.Restrictions)
			}
			if got := mustKey(t)(s.SetRestrictions(ctx, k.ID, nil)); got.Restrictions != nil {
				t.Errorf("cleared restrictions: %s, want none", got.Restrictions)
			}
			if _, err := s.SetRestrictions(ctx, k.ID+1, []byte(r)); !errors.Is(err, keys.ErrNotFound) {
				t.Errorf("set restrictions of no key: %v, want ErrNotFound", err)
			}
		}},
		{"set expiry", func(t *testing.T, s store) {
			k, secret := mustCreate(t)(s.Create(ctx, "ci", "free"))
			if k.Expired(time.Now().Add(100 * 365 * 24 * time.Hour)) {
				t.Error("a new key expires")
			}
			at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
			set := mustKey(t)(s.SetExpiry(ctx, k.ID, at))
			if !set.ExpiresAt.Equal(at) || !set.Expired(at) || set.Expired(at.Add(-time.Microsecond)) {
				t.Errorf("set expiry = %v, want %v", set.ExpiresAt, at)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); !got.ExpiresAt.Equal(at) {
				t.Errorf("lookup after set expiry: %v", got.ExpiresAt)
			}
			if got := mustKey(t)(s.SetExpiry(ctx, k.ID, time.Time{})); !got.ExpiresAt.IsZero() {
				t.Errorf("cleared expiry: %v, want none", got.ExpiresAt)
			}
			if _, err := s.SetExpiry(ctx, k.ID+1, at); !errors.Is(err, keys.ErrNotFound) {
				t.Errorf("set expiry of no key: %v, want ErrNotFound", err)
			}
		}},
		{"not found", func(t *testing.T, s store) {
			k, _ := mustCreate(t)(s.Create(ctx, "ci", "free"))
			for _, id := range []int64{0, -1, k.ID + 1} {
				if _, err := s.Get(ctx, id); !errors.Is(err, keys.ErrNotFound) {
					t.Errorf("get %d: %v, want ErrNotFound", id, err)
				}
				if _, err := s.Revoke(ctx, id); !errors.Is(err, keys.ErrNotFound) {
					t.Errorf("revoke %d: %v, want ErrNotFound", id, err)
				}
				if _, err := s.SetPlan(ctx, id, "pro"); !errors.Is(err, keys.ErrNotFound) {
					t.Errorf("set plan %d: %v, want ErrNotFound", id, err)
				}
			}
			if got := mustKey(t)(s.Get(ctx, k.ID)); !same(got, k) {
				t.Errorf("operations on other ids changed %+v to %+v", k, got)
			}
		}},
	} {
		for _, k := range kinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) { tc.test(t, k.newStore(t)) })
		}
	}
}

// TestPostgresKeepsNoSecret reads every column of the stored row as text
// and checks that no part of the secret beyond its prefix is there.
func TestPostgresKeepsNoSecret(t *testing.T) {
	ctx := context.Background()
	pool := spatialtest.Migrated(t)
	s := keys.NewPostgres(pool)
	k, secret, err := s.Create(ctx, "ci", "free")
	if err != nil {
		t.Fatal(err)
	}
	hidden := secret[len(k.Prefix)+1:]
	var cols []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(coalesce(v, '')) FROM api_keys k, jsonb_each_text(to_jsonb(k)) AS e(c, v) WHERE id = $1`,
		k.ID).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if len(cols) != 14 {
		t.Fatalf("row %q: want 14 columns", cols)
	}
	for _, v := range cols {
		if strings.Contains(v, secret) || strings.Contains(v, hidden) || strings.Contains(v, hidden[:8]) {
			t.Errorf("column value %q holds the secret %q", v, secret)
		}
	}
	if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); !same(got, k) {
		t.Errorf("lookup = %+v, want %+v", got, k)
	}
}
