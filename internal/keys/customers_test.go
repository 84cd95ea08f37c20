package keys_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
)

// mustCustomer returns a function that fails t on an error and returns the
// customer.
func mustCustomer(t *testing.T) func(keys.Customer, error) keys.Customer {
	return func(c keys.Customer, err error) keys.Customer {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// later returns once the clock, to the microsecond a store keeps, is past
// t: a change made then has a later UpdatedAt.
func later(t time.Time) {
	for !time.Now().Truncate(time.Microsecond).After(t) {
		runtime.Gosched()
	}
}

// sameCustomer reports whether a and b are the same version of a customer.
func sameCustomer(a, b keys.Customer) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Plan == b.Plan && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func TestCustomerStores(t *testing.T) {
	ctx := context.Background()
	kinds := kinds(t)
	for _, tc := range []struct {
		name string
		test func(t *testing.T, s store)
	}{
		{"create, get, list", func(t *testing.T, s store) {
			before := time.Now().Add(-time.Second)
			c := mustCustomer(t)(s.CreateCustomer(ctx, "acme", "pro"))
			if c.ID != 1 || c.Name != "acme" || c.Plan != "pro" || c.CreatedAt.Before(before) || !c.UpdatedAt.Equal(c.CreatedAt) {
				t.Errorf("created %+v", c)
			}
			d := mustCustomer(t)(s.CreateCustomer(ctx, "globex", "free"))
			if got := mustCustomer(t)(s.GetCustomer(ctx, c.ID)); !sameCustomer(got, c) {
				t.Errorf("get = %+v, want %+v", got, c)
			}
			cs, err := s.ListCustomers(ctx)
			if err != nil || len(cs) != 2 || !sameCustomer(cs[0], c) || !sameCustomer(cs[1], d) {
				t.Errorf("list = %+v, %v; want %+v, %+v", cs, err, c, d)
			}
			for _, id := range []int64{0, -1, d.ID + 1} {
				if _, err := s.GetCustomer(ctx, id); !errors.Is(err, keys.ErrCustomerNotFound) {
					t.Errorf("get customer %d: %v, want ErrCustomerNotFound", id, err)
				}
			}
		}},
		{"set plan, rename", func(t *testing.T, s store) {
			c := mustCustomer(t)(s.CreateCustomer(ctx, "acme", "free"))
			later(c.UpdatedAt)
			p := mustCustomer(t)(s.SetCustomerPlan(ctx, c.ID, "pro"))
			if p.Plan != "pro" || p.Name != "acme" || !p.UpdatedAt.After(c.UpdatedAt) || !p.CreatedAt.Equal(c.CreatedAt) {
				t.Errorf("set plan = %+v, was %+v", p, c)
			}
			later(p.UpdatedAt)
			r := mustCustomer(t)(s.RenameCustomer(ctx, c.ID, "Acme Corp"))
			if r.Plan != "pro" || r.Name != "Acme Corp" || !r.UpdatedAt.After(p.UpdatedAt) {
				t.Errorf("rename = %+v, was %+v", r, p)
			}
			if got := mustCustomer(t)(s.GetCustomer(ctx, c.ID)); !sameCustomer(got, r) {
				t.Errorf("get = %+v, want %+v", got, r)
			}
			if _, err := s.SetCustomerPlan(ctx, c.ID+1, "pro"); !errors.Is(err, keys.ErrCustomerNotFound) {
				t.Errorf("set plan of no customer: %v, want ErrCustomerNotFound", err)
			}
			if _, err := s.RenameCustomer(ctx, c.ID+1, "x"); !errors.Is(err, keys.ErrCustomerNotFound) {
				t.Errorf("rename no customer: %v, want ErrCustomerNotFound", err)
			}
		}},
		{"changed customers", func(t *testing.T, s store) {
			a := mustCustomer(t)(s.CreateCustomer(ctx, "a", "free"))
			b := mustCustomer(t)(s.CreateCustomer(ctx, "b", "free"))
			all, err := s.ChangedCustomers(ctx, time.Time{})
			if err != nil || len(all) != 2 {
				t.Fatalf("changed since ever = %+v, %v; want both", all, err)
			}
			later(b.UpdatedAt)
			moved := mustCustomer(t)(s.SetCustomerPlan(ctx, a.ID, "pro"))
			got, err := s.ChangedCustomers(ctx, b.UpdatedAt)
			if err != nil || len(got) != 1 || !sameCustomer(got[0], moved) {
				t.Errorf("changed since %v = %+v, %v; want %+v alone", b.UpdatedAt, got, err, moved)
			}
		}},
		{"a key's customer", func(t *testing.T, s store) {
			c := mustCustomer(t)(s.CreateCustomer(ctx, "acme", "pro"))
			k, secret := mustCreate(t)(s.CreateKind(ctx, keys.Publishable, "web", "free", c.ID))
			if k.CustomerID != c.ID || k.Kind() != keys.Publishable {
				t.Errorf("created %+v, want customer %d", k, c.ID)
			}
			if got := mustKey(t)(s.Lookup(ctx, keys.Hash(secret))); got.CustomerID != c.ID {
				t.Errorf("lookup = %+v, want customer %d", got, c.ID)
			}
			later(k.UpdatedAt)
			out := mustKey(t)(s.SetCustomer(ctx, k.ID, 0))
			if out.CustomerID != 0 || !out.UpdatedAt.After(k.UpdatedAt) {
				t.Errorf("out of its customer: %+v, was %+v", out, k)
			}
			in := mustKey(t)(s.SetCustomer(ctx, k.ID, c.ID))
			if got := mustKey(t)(s.Get(ctx, k.ID)); got.CustomerID != c.ID || !same(got, in) {
				t.Errorf("get = %+v, want %+v", got, in)
			}
			if ks := mustList(t)(s.List(ctx)); len(ks) != 1 || ks[0].CustomerID != c.ID {
				t.Errorf("list = %+v, want the key of customer %d", ks, c.ID)
			}
			if _, err := s.SetCustomer(ctx, k.ID, c.ID+1); !errors.Is(err, keys.ErrCustomerNotFound) {
				t.Errorf("set a customer that does not exist: %v, want ErrCustomerNotFound", err)
			}
			if _, err := s.SetCustomer(ctx, k.ID+1, c.ID); !errors.Is(err, keys.ErrNotFound) {
				t.Errorf("set the customer of no key: %v, want ErrNotFound", err)
			}
			if _, _, err := s.CreateKind(ctx, keys.Secret, "x", "free", c.ID+1); !errors.Is(err, keys.ErrCustomerNotFound) {
				t.Errorf("create a key of a customer that does not exist: %v, want ErrCustomerNotFound", err)
			}
			if ks := mustList(t)(s.List(ctx)); len(ks) != 1 {
				t.Errorf("a refused create made a key: %+v", ks)
			}
			if got := mustKey(t)(s.Get(ctx, k.ID)); got.CustomerID != c.ID || !same(got, in) {
				t.Errorf("refused changes changed the key: %+v, want %+v", got, in)
			}
		}},
	} {
		for _, k := range kinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) { tc.test(t, k.newStore(t)) })
		}
	}
}

// The index holds every key's customer: after a refresh, and after a
// lookup of a key made since; a customer's new version is taken in by a
// refresh, and each of its keys told again, so what a server resolved of
// its keys follows the customer.
func TestIndexCustomers(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			s := &counting{store: kind.newStore(t)}
			x := keys.NewIndex(s, time.Minute)
			var told []string
			x.OnChange(func(k keys.Key) {
				c, ok := x.Customer(k.CustomerID)
				if k.CustomerID != 0 && !ok {
					t.Errorf("key %d told before the index holds its customer %d", k.ID, k.CustomerID)
				}
				told = append(told, fmt.Sprintf("%d:%s", k.ID, c.Plan))
			})
			acme := mustCustomer(t)(s.CreateCustomer(ctx, "acme", "free"))
			a, secretA := mustCreate(t)(s.CreateKind(ctx, keys.Secret, "a", "free", acme.ID))
			b, _ := mustCreate(t)(s.CreateKind(ctx, keys.Secret, "b", "free", acme.ID))
			solo, _ := mustCreate(t)(s.Create(ctx, "solo", "free"))
			if _, ok := x.Customer(acme.ID); ok {
				t.Fatal("a customer held before any refresh")
			}
			mustRefresh(t, x)
			if got, ok := x.Customer(acme.ID); !ok || !sameCustomer(got, acme) {
				t.Errorf("customer = %+v, %v; want %+v", got, ok, acme)
			}
			if got := mustKey(t)(x.Find(secretA)); got.CustomerID != acme.ID {
				t.Errorf("find = %+v, want customer %d", got, acme.ID)
			}

			// A new plan of the customer: its two keys are told again, the
			// other key not.
			told = nil
			later(acme.UpdatedAt)
			moved := mustCustomer(t)(s.SetCustomerPlan(ctx, acme.ID, "pro"))
			mustRefresh(t, x)
			if got, _ := x.Customer(acme.ID); !sameCustomer(got, moved) {
				t.Errorf("customer after its change = %+v, want %+v", got, moved)
			}
			if want := []string{fmt.Sprintf("%d:pro", a.ID), fmt.Sprintf("%d:pro", b.ID)}; fmt.Sprint(told) != fmt.Sprint(want) {
				t.Errorf("told %v, want %v", told, want)
			}
			// Read again (the overlap), nothing is told twice.
			told = nil
			mustRefresh(t, x)
			if len(told) != 0 {
				t.Errorf("a refresh with no change told %v", told)
			}

			// A key moved into a customer made since the last refresh, and
			// a key of it looked up before any refresh: both come with it.
			globex := mustCustomer(t)(s.CreateCustomer(ctx, "globex", "std"))
			mustKey(t)(s.SetCustomer(ctx, solo.ID, globex.ID))
			initech := mustCustomer(t)(s.CreateCustomer(ctx, "initech", "five"))
			fresh, freshSecret := mustCreate(t)(s.CreateKind(ctx, keys.Secret, "fresh", "free", initech.ID))
			told = nil
			if got := mustKey(t)(x.Lookup(ctx, freshSecret)); got.CustomerID != initech.ID {
				t.Errorf("lookup = %+v, want customer %d", got, initech.ID)
			}
			if got, ok := x.Customer(initech.ID); !ok || !sameCustomer(got, initech) {
				t.Errorf("customer of a key looked up = %+v, %v; want %+v", got, ok, initech)
			}
			mustRefresh(t, x)
			if got, ok := x.Customer(globex.ID); !ok || !sameCustomer(got, globex) {
				t.Errorf("customer of a key moved = %+v, %v; want %+v", got, ok, globex)
			}
			if want := []string{fmt.Sprintf("%d:five", fresh.ID), fmt.Sprintf("%d:std", solo.ID)}; fmt.Sprint(told) != fmt.Sprint(want) {
				t.Errorf("told %v, want %v", told, want)
			}
			if n := s.lookups.Load(); n != 1 {
				t.Errorf("%d lookups, want the one", n)
			}
		})
	}
}
