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
	mu       sync.Mutex
	keys     []Key            // by id: keys[i].ID == i+1
	hashes   [][]byte         // hashes[i] is the hash of keys[i]'s secret
	previous [][]byte         // previous[i] is the hash of keys[i]'s secret before its last reroll, nil for none
	byHash   map[string]int64 // string(Hash(secret)) -> id
	byPrev   map[string]int64 // string(previous hash) -> id
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{byHash: make(map[string]int64), byPrev: make(map[string]int64)}
}

// Create makes a secret key with a new secret and returns it with the
// secret, which is not kept and cannot be shown again.
func (m *Memory) Create(ctx context.Context, name, plan string) (Key, string, error) {
	return m.CreateKind(ctx, Secret, name, plan)
}

// CreateKind makes a key of kind k with a new secret and returns it with
// the secret, which is not kept and cannot be shown again.
func (m *Memory) CreateKind(ctx context.Context, kind Kind, name, plan string) (Key, string, error) {
	secret, err := Generate(kind)
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
