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
	mu     sync.Mutex
	keys   []Key            // by id: keys[i].ID == i+1
	hashes [][]byte         // hashes[i] is the hash of keys[i]'s secret
	byHash map[string]int64 // string(Hash(secret)) -> id
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{byHash: make(map[string]int64)}
}

// Create makes a key with a new secret and returns it with the secret,
// which is not kept and cannot be shown again.
func (m *Memory) Create(ctx context.Context, name, plan string) (Key, string, error) {
	secret, err := Generate()
	if err != nil {
		return Key{}, "", err
	}
	k, err := m.Add(ctx, name, plan, secret)
	return k, secret, err
}

// Add registers a key with the given secret, such as a demo key. If the
// secret is already registered it returns that key unchanged, whatever
// name and plan it is given.
func (m *Memory) Add(_ context.Context, name, plan, secret string) (Key, error) {
	h := string(Hash(secret))
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.byHash[h]; ok {
		return m.keys[id-1], nil
	}
	k := Key{
		ID:     int64(len(m.keys)) + 1,
		Prefix: PrefixOf(secret),
		Name:   name,
		Plan:   plan,
		// PostgreSQL keeps microseconds: so does Memory, so the two agree.
		CreatedAt: now(),
	}
	k.UpdatedAt = k.CreatedAt
	m.keys = append(m.keys, k)
	m.hashes = append(m.hashes, []byte(h))
	m.byHash[h] = k.ID
	return k, nil
}

// Lookup returns the key whose secret has the given hash, revoked or not,
// or ErrUnknown.
func (m *Memory) Lookup(_ context.Context, hash []byte) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byHash[string(hash)]
	if !ok {
		return Key{}, ErrUnknown
	}
	return m.keys[id-1], nil
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
	for i, k := range m.keys {
		if k.UpdatedAt.After(since) {
			es = append(es, Entry{Hash: m.hashes[i], Key: k})
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
	return m.update(id, func(k *Key) {
		if !k.Revoked() {
			k.RevokedAt = now()
		}
	})
}

// SetPlan moves the key with the given id to plan and returns it, or
// ErrNotFound.
func (m *Memory) SetPlan(_ context.Context, id int64, plan string) (Key, error) {
	return m.update(id, func(k *Key) { k.Plan = plan })
}

// SetOverrides stores the key's overrides (JSON; nil clears them) and
// returns the key, or ErrNotFound. The caller validates them.
func (m *Memory) SetOverrides(_ context.Context, id int64, overrides []byte) (Key, error) {
	return m.update(id, func(k *Key) { k.Overrides = overrides })
}

// SetRestrictions stores the key's restrictions (JSON; nil clears them)
// and returns the key, or ErrNotFound. The caller validates them.
func (m *Memory) SetRestrictions(_ context.Context, id int64, restrictions []byte) (Key, error) {
	return m.update(id, func(k *Key) { k.Restrictions = restrictions })
}

// SetExpiry sets when the key stops working (the zero time: never) and
// returns the key, or ErrNotFound.
func (m *Memory) SetExpiry(_ context.Context, id int64, at time.Time) (Key, error) {
	return m.update(id, func(k *Key) { k.ExpiresAt = at.UTC().Truncate(time.Microsecond) })
}

// update applies the change f to the key with the given id under the lock
// and returns the result.
func (m *Memory) update(id int64, f func(*Key)) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id < 1 || id > int64(len(m.keys)) {
		return Key{}, fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	k := &m.keys[id-1]
	f(k)
	k.UpdatedAt = now()
	return *k, nil
}

// now is the current time as PostgreSQL would store it: UTC, to the
// microsecond.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
