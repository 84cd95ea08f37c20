// Package inflight limits how many requests of one identity are in
// progress at once, across every server, with leases.
//
// A request takes a lease before its work and gives it back after: with
// its quota charge, in the charge's own script (Redis.Hold, one round
// trip), or on its own (Acquire, Release). A lease held in Redis lasts a
// lease time unless renewed, so the slots of a server that dies (or
// hangs) come free within a lease time without anyone cleaning up; the
// holder renews its leases while its work runs. Memory holds the same
// count in one process.
package inflight

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/tileapi/tileapi/quota/internal/redisclock"
	"github.com/tileapi/tileapi/quota/internal/redislayout"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultLease is how long a lease lasts unless renewed.
const DefaultLease = 10 * time.Second

// ErrInvalid is matched by a call with an empty identity or a limit below
// one.
var ErrInvalid = errors.New("inflight: invalid")

// ErrLate reports an acquire that reached Redis after the deadline of its
// context, and therefore took no slot: a caller that gave up on it holds
// nothing it would not release.
var ErrLate = errors.New("inflight: the acquire reached Redis after its deadline and took no slot")

// Lease is one slot held. The zero Lease holds none.
type Lease struct {
	identity string
	id       string
}

// IsZero reports whether the lease holds no slot.
func (l Lease) IsZero() bool { return l.id == "" }

// Denial is why Acquire gave no slot: every one is held.
type Denial struct {
	// Max is the limit.
	Max int
	// RetryAfter is when the first held slot expires if nobody releases
	// it: an upper bound, since a release usually comes sooner.
	RetryAfter time.Duration
}

func check(identity string, max int) error {
	if identity == "" || max < 1 {
		return fmt.Errorf("%w: identity %q, max %d", ErrInvalid, identity, max)
	}
	return nil
}

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)
	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)
)

// scripter is what Redis needs of a client: a *redis.Client, a
// *redis.ClusterClient or any redis.UniversalClient.
type scripter interface {
	redis.Scripter
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
	Pipeline() redis.Pipeliner
}

// DefaultPrefix starts every key Redis writes.
const DefaultPrefix = "inflight:"

// Redis holds leases in Redis, shared by every server.
type Redis struct {
	client  scripter
	prefix  string
	lease   time.Duration
	offset  redisclock.Offset // of Redis's clock from this process's
	pending pending           // releases owed, sent in the background
}

// Option configures a Redis.
type Option func(*Redis)

// WithLease sets how long a lease lasts unless renewed (default
// DefaultLease): a dead server's slots come free within it.
func WithLease(d time.Duration) Option { return func(r *Redis) { r.lease = d } }

// WithPrefix sets the prefix of every key (default DefaultPrefix).
func WithPrefix(prefix string) Option { return func(r *Redis) { r.prefix = prefix } }

// NewRedis returns leases held in client.
func NewRedis(client scripter, opts ...Option) *Redis {
	r := &Redis{client: client, prefix: DefaultPrefix, lease: DefaultLease}
	for _, o := range opts {
		o(r)
	}
	if r.lease < time.Millisecond {
		r.lease = DefaultLease
	}
	return r
}

// Lease returns how long a lease lasts unless renewed: renew well within it.
func (r *Redis) Lease() time.Duration { return r.lease }

// Acquire takes one of max slots of identity, or reports a Denial when all
// are held: a denial is not an error. An empty identity or max below one
// returns an error matching ErrInvalid, before any I/O. An acquire that
// reaches Redis after ctx's deadline (halfway to it, leaving the other
// half for the reply) takes no slot and returns ErrLate. Any other error is
// Redis's, wrapped, after which a slot may have been taken: it is given
// back in the background, or with the identity's next acquire, charge or
// release, or comes free within a lease time. The identity's releases that failed are made first, in
// the same round trip.
func (r *Redis) Acquire(ctx context.Context, identity string, max int) (Lease, *Denial, error) {
	if err := check(identity, max); err != nil {
		return Lease{}, nil, err
	}
	id, err := newID()
	if err != nil {
		return Lease{}, nil, err
	}
	released, sent := r.pending.of(identity), time.Now()
	args := append([]any{id, max, r.lease.Milliseconds(), r.offset.Deadline(ctx)}, anys(released)...)
	reply, err := acquireScript.Run(ctx, r.client, []string{r.key(identity)}, args...).Int64Slice()
	if err != nil {
		r.unknown(ctx, Lease{identity: identity, id: id})
		return Lease{}, nil, fmt.Errorf("inflight: acquire: %w", err)
	}
	if len(reply) != 3 || reply[0] < -1 || reply[0] > 1 {
		return Lease{}, nil, fmt.Errorf("inflight: acquire: script returned %v", reply)
	}
	r.offset.Observe(reply[2])
	r.pending.done(identity, released, sent)
	switch reply[0] {
	case -1:
		return Lease{}, nil, ErrLate
	case 0:
		return Lease{}, &Denial{Max: max, RetryAfter: time.Duration(reply[1]) * time.Millisecond}, nil
	}
	return Lease{identity: identity, id: id}, nil, nil
}

// Renew extends a held lease by a lease time from now, and reports whether
// it was still held: false means it expired, and its slot may be taken.
// The zero Lease reports false. Its only errors are Redis's, wrapped.
func (r *Redis) Renew(ctx context.Context, l Lease) (bool, error) {
	if l.IsZero() {
		return false, nil
	}
	n, err := renewScript.Run(ctx, r.client, []string{r.key(l.identity)}, l.id, r.lease.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("inflight: renew: %w", err)
	}
	return n == 1, nil
}

// Release gives a slot back, and with it those of the identity's releases
// that failed before. Releasing a lease twice, or one that expired, is
// harmless. Its only errors are Redis's, wrapped; the release is then made
// again in the background and with the identity's next acquire, charge or
// release, or, should Redis answer none of them, the slot comes free
// within a lease time.
func (r *Redis) Release(ctx context.Context, l Lease) error {
	if l.IsZero() {
		return nil
	}
	ids, sent := append([]string{l.id}, r.pending.of(l.identity)...), time.Now()
	if err := r.client.ZRem(ctx, r.key(l.identity), anys(ids)...).Err(); err != nil {
		r.releaseLater(l, time.Time{})
		return fmt.Errorf("inflight: release: %w", err)
	}
	r.pending.done(l.identity, ids, sent)
	return nil
}

// Dropped returns how many failed releases were not kept to be made again,
// because too many were pending: their slots came free when their leases
// expired.
func (r *Redis) Dropped() int64 {
	r.pending.mu.Lock()
	defer r.pending.mu.Unlock()
	return r.pending.dropped
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// key is the identity's lease set, tagged as the quota's keys of the
// identity are (one to one, no brace left), so that a charge can take a
// slot in its script on a Redis Cluster too.
func (r *Redis) key(identity string) string { return redislayout.Key(r.prefix, identity, "") }

func newID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("inflight: lease id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Memory holds leases in one process. Its leases never expire: a process
// that dies takes them with it.
type Memory struct {
	mu    sync.Mutex
	held  map[string]map[string]bool // identity -> lease ids
	count int64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{held: make(map[string]map[string]bool)} }

// Acquire takes one of max slots of identity, or reports a Denial when all
// are held; RetryAfter is then a second, since no lease expires. Its only
// error matches ErrInvalid: an empty identity or max below one.
func (m *Memory) Acquire(_ context.Context, identity string, max int) (Lease, *Denial, error) {
	if err := check(identity, max); err != nil {
		return Lease{}, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.held[identity]) >= max {
		return Lease{}, &Denial{Max: max, RetryAfter: time.Second}, nil
	}
	return m.take(identity), nil, nil
}

// take takes a slot of identity, with m.mu held.
func (m *Memory) take(identity string) Lease {
	if m.held[identity] == nil {
		m.held[identity] = make(map[string]bool)
	}
	m.count++
	id := strconv.FormatInt(m.count, 10)
	m.held[identity][id] = true
	return Lease{identity: identity, id: id}
}

// Renew reports whether the lease is held; Memory's leases do not expire.
// It never fails.
func (m *Memory) Renew(_ context.Context, l Lease) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[l.identity][l.id], nil
}

// Release gives a slot back; twice is harmless. It never fails.
func (m *Memory) Release(_ context.Context, l Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held[l.identity], l.id)
	if len(m.held[l.identity]) == 0 {
		delete(m.held, l.identity)
	}
	return nil
}

// Lease returns how long a lease lasts: Memory's last until released.
func (m *Memory) Lease() time.Duration { return 0 }
