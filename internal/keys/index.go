package keys

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// CacheSize is the most unknown keys an Index remembers. When it is full a
// new entry replaces a random one, so a flood of made-up keys costs memory
// no more than this.
const CacheSize = 10_000

// overlap is how far back each refresh reads changes before the newest one
// it has seen: a change whose transaction began earlier but committed later
// than that newest one is still read.
const overlap = time.Minute

// ErrNotIndexed means the Index does not know the presented secret: it may
// be a key made since the last refresh, or a made-up one. Only Lookup can
// tell, at the cost of a round trip to the store.
var ErrNotIndexed = errors.New("keys: not in the index")

// ErrUnavailable is matched by a failure of the key store: the key could
// not be checked.
var ErrUnavailable = errors.New("keys: key store unavailable")

// source is the store an Index reads: a *Postgres or a *Memory.
type source interface {
	LookupEntry(ctx context.Context, hash []byte) (Entry, error)
	Changed(ctx context.Context, since time.Time) ([]Entry, error)
	GetCustomer(ctx context.Context, id int64) (Customer, error)
	ChangedCustomers(ctx context.Context, since time.Time) ([]Customer, error)
}

// Entry is a key with the hash of its secret, and of its secret before
// its last reroll (nil for none), as Changed returns it.
type Entry struct {
	Hash     []byte
	Previous []byte
	Key      Key
}

// Index holds every API key in process, by the hash of its secret, and
// every customer, by id, and keeps itself fresh by reading the store's
// changes (Refresh, Run). A request is then answered from memory: a known
// key, active or revoked, and its customer cost no round trip, and
// neither does a made-up key that was looked up before. A key the index
// does not know yet (made on another server since the last refresh) is
// found by Lookup, with its customer. It is safe for concurrent use.
type Index struct {
	store source
	every time.Duration

	refreshing sync.Mutex // one Refresh at a time
	mu         sync.RWMutex
	byHash     map[string]slot      // string(hash of a secret) -> the key it is of
	byID       map[int64]held       // key id -> its latest version taken in
	customers  map[int64]Customer   // customer id -> its latest version taken in
	unknown    map[string]time.Time // hashes the store did not have, until when that is believed
	newest     time.Time            // the latest UpdatedAt of a key read by a refresh
	newestC    time.Time            // the latest UpdatedAt of a customer read by a refresh
	refreshed  time.Time            // when the last successful Refresh began
	onChange   func(Key)            // told of each key version taken in
}

// slot is what a hash in the index stands for: a key's current secret or
// its secret before its last reroll.
type slot struct {
	id       int64
	previous bool
}

// held is the version of a key the index holds, with its hashes.
type held struct {
	key            Key
	hash, previous string // previous is "" for none
}

// OnChange has f told of each version of a key the index takes in, by the
// refresh or lookup that read it, before Find returns it, and of each key
// of a customer again when the index takes in a new version of the
// customer (Customer then returns it): so a server can resolve what a key
// needs (its plan with its overrides, and its customer's) once a version,
// off the request path. Call it before the first Refresh.
func (x *Index) OnChange(f func(Key)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.onChange = f
}

// NewIndex returns an empty Index of store (a *Postgres or a *Memory) that
// Run refreshes every every. An unknown key looked up is remembered as
// unknown for every as well.
func NewIndex(store source, every time.Duration) *Index {
	return &Index{
		store: store, every: every,
		byHash: make(map[string]slot), byID: make(map[int64]held), customers: make(map[int64]Customer),
		unknown: make(map[string]time.Time),
	}
}

// Customer answers from memory: the customer with the given id, as its
// latest version read, and whether the index holds it. The index holds
// the customer of every key it holds.
func (x *Index) Customer(id int64) (Customer, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	c, ok := x.customers[id]
	return c, ok
}

// Find answers from memory: the key whose secret was presented, the key
// with ErrRevoked if it has been revoked, with ErrRotated if the secret is
// the one it had before its last reroll and the overlap is over, with
// ErrExpired if it is past its ExpiresAt; ErrUnknown for a secret the
// store did not have when last asked, or ErrNotIndexed if the index cannot
// tell.
func (x *Index) Find(secret string) (Key, error) {
	h := Hash(secret)
	x.mu.RLock()
	sl, found := x.byHash[string(h)] // m[string(b)] converts without allocating
	k := x.byID[sl.id].key
	until, unknown := x.unknown[string(h)]
	x.mu.RUnlock()
	switch {
	case found:
		return verdict(k, sl.previous, time.Now())
	case unknown && time.Now().Before(until):
		return Key{}, ErrUnknown
	}
	return Key{}, ErrNotIndexed
}

// FindByID answers from memory: the key with the given id (as its latest
// version read), the key with ErrRevoked if it has been revoked or
// ErrExpired if it is past its ExpiresAt, or ErrNotIndexed if the index
// does not hold it. It serves what is presented on behalf of a key, such
// as a short-lived token naming its parent key, and never asks the store.
func (x *Index) FindByID(id int64) (Key, error) {
	x.mu.RLock()
	hd, found := x.byID[id]
	x.mu.RUnlock()
	if !found {
		return Key{}, ErrNotIndexed
	}
	return verdict(hd.key, false, time.Now())
}

// verdict is what presenting k's secret (its previous one, if previous)
// at now comes to: k, with the error that refuses it if one does.
func verdict(k Key, previous bool, now time.Time) (Key, error) {
	switch {
	case k.Revoked():
		return k, ErrRevoked
	case previous && !now.Before(k.PreviousValidUntil):
		return k, ErrRotated
	case k.Expired(now):
		return k, ErrExpired
	}
	return k, nil
}

// Lookup asks the store for the key whose secret was presented, and for
// its customer if the index does not hold it, and adds the answers to the
// index. It returns what Find would then return, or an error matching
// ErrUnavailable if the store failed.
func (x *Index) Lookup(ctx context.Context, secret string) (Key, error) {
	h := Hash(secret)
	e, err := x.store.LookupEntry(ctx, h)
	switch {
	case errors.Is(err, ErrUnknown):
		x.mu.Lock()
		x.forgetOneIfFull()
		x.unknown[string(h)] = time.Now().Add(x.every)
		x.mu.Unlock()
		return Key{}, ErrUnknown
	case err != nil:
		return Key{}, fmt.Errorf("keys: lookup %s: %w", PrefixOf(secret), unavailable(err))
	}
	if id := e.Key.CustomerID; id != 0 {
		if _, held := x.Customer(id); !held {
			c, err := x.store.GetCustomer(ctx, id)
			if err != nil {
				return Key{}, fmt.Errorf("keys: lookup %s: customer %d: %w", PrefixOf(secret), id, unavailable(err))
			}
			x.mu.Lock()
			x.putCustomer(c)
			x.mu.Unlock()
		}
	}
	x.changed(e.Key)
	x.mu.Lock()
	x.put(e)
	x.mu.Unlock()
	return verdict(e.Key, !bytes.Equal(e.Hash, h), time.Now())
}

// Refresh reads every key and customer changed since the last refresh
// (every one, the first time) into the index. An error matches ErrUnavailable and leaves
// the index as it was.
func (x *Index) Refresh(ctx context.Context) error {
	x.refreshing.Lock()
	defer x.refreshing.Unlock()
	return x.refresh(ctx)
}

// RefreshIfOlder refreshes the index unless a refresh that began within age
// has succeeded, for a caller that must not refuse a key made moments ago
// on another server. Concurrent callers share one refresh.
func (x *Index) RefreshIfOlder(ctx context.Context, age time.Duration) error {
	x.refreshing.Lock()
	defer x.refreshing.Unlock()
	x.mu.RLock()
	fresh := time.Since(x.refreshed) < age
	x.mu.RUnlock()
	if fresh {
		return nil
	}
	return x.refresh(ctx)
}

func (x *Index) refresh(ctx context.Context) error {
	start := time.Now()
	x.mu.RLock()
	since, sinceC := before(x.newest), before(x.newestC)
	x.mu.RUnlock()
	changed, err := x.store.Changed(ctx, since)
	if err != nil {
		return fmt.Errorf("keys: refresh: %w", unavailable(err))
	}
	// Customers after keys: a customer was made before any key named it,
	// so the customer of every key just read is read now if it was not
	// before.
	customers, err := x.store.ChangedCustomers(ctx, sinceC)
	if err != nil {
		return fmt.Errorf("keys: refresh: %w", unavailable(err))
	}
	// A new version of a customer is taken in first, for its keys to be
	// resolved with it. A key version is told before the index holds it,
	// so that no request finds it before it is resolved; a version read
	// again (the overlap) is not told twice.
	x.mu.Lock()
	recustomed := make(map[int64]bool) // customers of which a new version is taken in
	for _, c := range customers {
		if x.putCustomer(c) {
			recustomed[c.ID] = true
		}
		if c.UpdatedAt.After(x.newestC) {
			x.newestC = c.UpdatedAt
		}
	}
	var tell []Key
	told := make(map[int64]bool)
	for _, e := range changed {
		if old, ok := x.byID[e.Key.ID]; !ok || e.Key.UpdatedAt.After(old.key.UpdatedAt) {
			tell = append(tell, e.Key)
			told[e.Key.ID] = true
		}
	}
	if len(recustomed) > 0 {
		var again []Key // the keys of those customers held and not told above, by id
		for id, hd := range x.byID {
			if recustomed[hd.key.CustomerID] && !told[id] {
				again = append(again, hd.key)
			}
		}
		slices.SortFunc(again, func(a, b Key) int { return cmp.Compare(a.ID, b.ID) })
		tell = append(tell, again...)
	}
	x.mu.Unlock()
	for _, k := range tell {
		x.changed(k)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range changed {
		x.put(e)
		if e.Key.UpdatedAt.After(x.newest) {
			x.newest = e.Key.UpdatedAt
		}
	}
	x.refreshed = start
	return nil
}

// before is where a refresh reads changes from, given the latest UpdatedAt
// it has read: overlap before it, or from the start for none.
func before(newest time.Time) time.Time {
	if newest.IsZero() {
		return time.Time{}
	}
	return newest.Add(-overlap)
}

// putCustomer takes in c unless the index holds the same version or a
// later one, and reports whether it took it; the caller holds mu.
func (x *Index) putCustomer(c Customer) bool {
	if old, ok := x.customers[c.ID]; ok && !c.UpdatedAt.After(old.UpdatedAt) {
		return false
	}
	x.customers[c.ID] = c
	return true
}

// changed tells OnChange's function of k, if there is one.
func (x *Index) changed(k Key) {
	x.mu.RLock()
	f := x.onChange
	x.mu.RUnlock()
	if f != nil {
		f(k)
	}
}

// Run refreshes the index at once and then every interval given to
// NewIndex until ctx is done, passing each failure to onError (the index
// keeps what it had).
func (x *Index) Run(ctx context.Context, onError func(error)) {
	t := time.NewTicker(x.every)
	defer t.Stop()
	for {
		if err := x.Refresh(ctx); err != nil && ctx.Err() == nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Len returns how many keys the index holds.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// put indexes e's key under its hashes, unless the index holds a later
// version of it, and forgets the hashes of the version it replaces; the
// caller holds mu. A hash that is one key's current secret and another's
// previous one (a hand-picked secret registered again after a reroll)
// stands for the key it is current for.
func (x *Index) put(e Entry) {
	id := e.Key.ID
	if old, ok := x.byID[id]; ok {
		if old.key.UpdatedAt.After(e.Key.UpdatedAt) {
			return
		}
		for _, h := range []string{old.hash, old.previous} {
			if sl, ok := x.byHash[h]; ok && sl.id == id {
				delete(x.byHash, h)
			}
		}
	}
	hd := held{key: e.Key, hash: string(e.Hash), previous: string(e.Previous)}
	x.byID[id] = hd
	x.byHash[hd.hash] = slot{id: id}
	delete(x.unknown, hd.hash)
	if hd.previous != "" {
		if sl, ok := x.byHash[hd.previous]; !ok || sl.previous {
			x.byHash[hd.previous] = slot{id: id, previous: true}
		}
		delete(x.unknown, hd.previous)
	}
}

// forgetOneIfFull makes room for one unknown hash; the caller holds mu.
func (x *Index) forgetOneIfFull() {
	if len(x.unknown) < CacheSize {
		return
	}
	for h := range x.unknown { // map iteration starts at random
		delete(x.unknown, h)
		return
	}
}

// unavailable makes err match ErrUnavailable: whatever made the store fail,
// the key could not be checked.
func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
