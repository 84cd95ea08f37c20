package keys

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory keeps keys in process, for the embedded mode with no database.
// Like Postgres it holds hashes, never secrets. It is safe for concurrent
// use.
type Memory struct {
	mu        sync.Mutex
	customers []Customer       // by id: customers[i].ID == i+1
	keys      []Key            // by id: keys[i].ID == i+1
	hashes    [][]byte         // hashes[i] is the hash of keys[i]'s secret
	previous  [][]byte         // previous[i] is the hash of keys[i]'s secret before its last reroll, nil for none
	byHash    map[string]int64 // string(Hash(secret)) -> id
	byPrev    map[string]int64 // string(previous hash) -> id
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{byHash: make(map[string]int64), byPrev: make(map[string]int64)}
}

// Create makes a secret key with a new secret and returns it with the
// secret, which is not kept and cannot be shown again.
func (m *Memory) Create(ctx context.Context, name, plan string) (Key, string, error) {
	return m.CreateKind(ctx, Secret, name, plan, 0)
}

// CreateKind makes a key of kind k with a new secret, of the customer
// customerID (0 for none), and returns it with the secret, which is not
// kept and cannot be shown again. It returns ErrCustomerNotFound if there
// is no such customer.
func (m *Memory) CreateKind(_ context.Context, kind Kind, name, plan string, customerID int64) (Key, string, error) {
	secret, err := Generate(kind)
	if err != nil {
		return Key{}, "", err
	}
	k, err := m.add(name, plan, secret, customerID)
	return k, secret, err
}

// Add registers a key with the given secret, such as a demo key. If the
// secret is already registered it returns that key unchanged, whatever
// name and plan it is given.
func (m *Memory) Add(_ context.Context, name, plan, secret string) (Key, error) {
	return m.add(name, plan, secret, 0)
}

func (m *Memory) add(name, plan, secret string, customerID int64) (Key, error) {
	h := string(Hash(secret))
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.byHash[h]; ok {
		return m.keys[id-1], nil
	}
	if err := m.checkCustomer(customerID); err != nil {
		return Key{}, err
	}
	k := Key{
		ID:     int64(len(m.keys)) + 1,
		Prefix: PrefixOf(secret),
		Name:   name,
		Plan:   plan,
		// PostgreSQL keeps microseconds: so does Memory, so the two agree.
		CreatedAt:  now(),
		CustomerID: customerID,
	}
	k.UpdatedAt = k.CreatedAt
	m.keys = append(m.keys, k)
	m.hashes = append(m.hashes, []byte(h))
	m.previous = append(m.previous, nil)
	m.byHash[h] = k.ID
	return k, nil
}

// Lookup returns the key whose secret, or secret before its last reroll,
// has the given hash, revoked or not, or ErrUnknown.
func (m *Memory) Lookup(ctx context.Context, hash []byte) (Key, error) {
	e, err := m.LookupEntry(ctx, hash)
	return e.Key, err
}

// LookupEntry is Lookup with the key's hashes: whether hash is the key's
// current secret or its previous one.
func (m *Memory) LookupEntry(_ context.Context, hash []byte) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byHash[string(hash)]
	if !ok {
		if id, ok = m.byPrev[string(hash)]; !ok {
			return Entry{}, ErrUnknown
		}
	}
	return m.entry(id), nil
}

// entry is the entry of key id; the caller holds mu.
func (m *Memory) entry(id int64) Entry {
	return Entry{Hash: m.hashes[id-1], Previous: m.previous[id-1], Key: m.keys[id-1]}
}

// List returns every key, revoked ones too, by id.
func (m *Memory) List(context.Context) ([]Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Key(nil), m.keys...), nil
}

// Changed returns every key, with its hash, whose UpdatedAt is after since.
func (m *Memory) Changed(_ context.Context, since time.Time) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var es []Entry
	for _, k := range m.keys {
		if k.UpdatedAt.After(since) {
			es = append(es, m.entry(k.ID))
		}
	}
	return es, nil
}

// Get returns the key with the given id, or ErrNotFound.
func (m *Memory) Get(_ context.Context, id int64) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 1 || id > int64(len(m.keys)) {
		return Key{}, fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	return m.keys[id-1], nil
}

// Revoke revokes the key with the given id and returns it; revoking a
// revoked key keeps its first revocation time. It returns ErrNotFound if
// there is no such key.
func (m *Memory) Revoke(_ context.Context, id int64) (Key, error) {
	return m.update(id, func(k *Key) error {
		if !k.Revoked() {
			k.RevokedAt = now()
		}
		return nil
	})
}

// SetPlan moves the key with the given id to plan and returns it, or
// ErrNotFound.
func (m *Memory) SetPlan(_ context.Context, id int64, plan string) (Key, error) {
	return m.update(id, func(k *Key) error { k.Plan = plan; return nil })
}

// SetOverrides stores the key's overrides (JSON; nil clears them) and
// returns the key, or ErrNotFound. The caller validates them.
func (m *Memory) SetOverrides(_ context.Context, id int64, overrides []byte) (Key, error) {
	return m.update(id, func(k *Key) error { k.Overrides = overrides; return nil })
}

// SetRestrictions stores the key's restrictions (JSON; nil clears them)
// and returns the key, or ErrNotFound. The caller validates them.
func (m *Memory) SetRestrictions(_ context.Context, id int64, restrictions []byte) (Key, error) {
	return m.update(id, func(k *Key) error { k.Restrictions = restrictions; return nil })
}

// SetExpiry sets when the key stops working (the zero time: never) and
// returns the key, or ErrNotFound.
func (m *Memory) SetExpiry(_ context.Context, id int64, at time.Time) (Key, error) {
	return m.update(id, func(k *Key) error { k.ExpiresAt = at.UTC().Truncate(time.Microsecond); return nil })
}

// Reroll gives the key with the given id a new secret of its kind and
// returns the key with it, shown this once: the secret it had works on
// for overlap (0: it stops at once), then is refused (ErrRotated), and a
// previous secret of an earlier reroll stops at once. Its id, plan,
// overrides, restrictions and usage stay. It returns ErrNotFound if there
// is no such key.
func (m *Memory) Reroll(_ context.Context, id int64, overlap time.Duration) (Key, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 1 || id > int64(len(m.keys)) {
		return Key{}, "", fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	k := &m.keys[id-1]
	secret, err := Generate(k.Kind())
	if err != nil {
		return Key{}, "", err
	}
	if old := m.previous[id-1]; old != nil {
		delete(m.byPrev, string(old))
	}
	h := Hash(secret)
	delete(m.byHash, string(m.hashes[id-1]))
	m.previous[id-1], m.hashes[id-1] = m.hashes[id-1], h
	m.byPrev[string(m.previous[id-1])] = id
	m.byHash[string(h)] = id
	k.Prefix = PrefixOf(secret)
	k.UpdatedAt = now()
	k.PreviousValidUntil = k.UpdatedAt.Add(max(overlap, 0)).Truncate(time.Microsecond)
	return *k, secret, nil
}

// SetCustomer moves the key with the given id to the customer customerID,
// or out of any for 0, and returns it; ErrNotFound if there is no such
// key, ErrCustomerNotFound if there is no such customer.
func (m *Memory) SetCustomer(_ context.Context, id, customerID int64) (Key, error) {
	return m.update(id, func(k *Key) error {
		if err := m.checkCustomer(customerID); err != nil {
			return err
		}
		k.CustomerID = customerID
		return nil
	})
}

// update applies the change f to the key with the given id under the lock
// and returns the result; an error of f changes nothing.
func (m *Memory) update(id int64, f func(*Key) error) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 1 || id > int64(len(m.keys)) {
		return Key{}, fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	k := m.keys[id-1]
	if err := f(&k); err != nil {
		return Key{}, err
	}
	k.UpdatedAt = now()
	m.keys[id-1] = k
	return k, nil
}

// CreateCustomer makes a customer on plan and returns it.
func (m *Memory) CreateCustomer(_ context.Context, name, plan string) (Customer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := Customer{ID: int64(len(m.customers)) + 1, Name: name, Plan: plan, CreatedAt: now()}
	c.UpdatedAt = c.CreatedAt
	m.customers = append(m.customers, c)
	return c, nil
}

// GetCustomer returns the customer with the given id, or
// ErrCustomerNotFound.
func (m *Memory) GetCustomer(_ context.Context, id int64) (Customer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.customerAt(id)
	if err != nil {
		return Customer{}, err
	}
	return *c, nil
}

// ListCustomers returns every customer, by id.
func (m *Memory) ListCustomers(context.Context) ([]Customer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Customer(nil), m.customers...), nil
}

// ChangedCustomers returns every customer whose UpdatedAt is after since.
func (m *Memory) ChangedCustomers(_ context.Context, since time.Time) ([]Customer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cs []Customer
	for _, c := range m.customers {
		if c.UpdatedAt.After(since) {
			cs = append(cs, c)
		}
	}
	return cs, nil
}

// SetCustomerPlan moves the customer with the given id to plan and returns
// it, or ErrCustomerNotFound.
func (m *Memory) SetCustomerPlan(_ context.Context, id int64, plan string) (Customer, error) {
	return m.updateCustomer(id, func(c *Customer) { c.Plan = plan })
}

// RenameCustomer gives the customer with the given id a new name and
// returns it, or ErrCustomerNotFound.
func (m *Memory) RenameCustomer(_ context.Context, id int64, name string) (Customer, error) {
	return m.updateCustomer(id, func(c *Customer) { c.Name = name })
}

// updateCustomer applies the change f to the customer with the given id
// under the lock and returns the result.
func (m *Memory) updateCustomer(id int64, f func(*Customer)) (Customer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.customerAt(id)
	if err != nil {
		return Customer{}, err
	}
	f(c)
	c.UpdatedAt = now()
	return *c, nil
}

// customerAt returns the customer with the given id, or
// ErrCustomerNotFound; the caller holds mu.
func (m *Memory) customerAt(id int64) (*Customer, error) {
	if id < 1 || id > int64(len(m.customers)) {
		return nil, fmt.Errorf("%w: id %d", ErrCustomerNotFound, id)
	}
	return &m.customers[id-1], nil
}

// checkCustomer reports ErrCustomerNotFound unless id is 0 (none) or a
// customer's; the caller holds mu.
func (m *Memory) checkCustomer(id int64) error {
	if id == 0 {
		return nil
	}
	_, err := m.customerAt(id)
	return err
}

// now is the current time as PostgreSQL would store it: UTC, to the
// microsecond.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
