package inflight

import (
	"slices"
	"sync"
	"time"
)

// maxPending bounds the releases kept to be made again; beyond it the
// oldest is dropped, and its slot comes free when its lease expires.
const maxPending = 1024

// maxPendingPerCall bounds the releases one call carries.
const maxPendingPerCall = 256

// pending holds the leases whose release failed, and those whose acquire
// failed after it may have taken its slot, until they would have expired
// anyway: each identity's go with its next acquire or release, which make
// them in the same round trip.
type pending struct {
	mu      sync.Mutex
	queue   []pendingLease // oldest first: each lasts one lease, so this is their order of expiry
	dropped int64
}

type pendingLease struct {
	Lease
	expires time.Time
}

// add keeps l until a lease time from now, past which it has expired in
// Redis too: it was last renewed before now.
func (p *pending) add(l Lease, lease time.Duration) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire(now)
	if len(p.queue) == maxPending {
		p.queue = slices.Delete(p.queue, 0, 1)
		p.dropped++
	}
	p.queue = append(p.queue, pendingLease{Lease: l, expires: now.Add(lease)})
}

// of returns the ids of identity's pending leases, at most
// maxPendingPerCall, oldest first.
func (p *pending) of(identity string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		return nil
	}
	p.expire(time.Now())
	var ids []string
	for _, l := range p.queue {
		if l.identity == identity && len(ids) < maxPendingPerCall {
			ids = append(ids, l.id)
		}
	}
	return ids
}

// done forgets the leases of identity with ids: they are released.
func (p *pending) done(identity string, ids []string) {
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = slices.DeleteFunc(p.queue, func(l pendingLease) bool {
		return l.identity == identity && slices.Contains(ids, l.id)
	})
}

// expire forgets the leases expired by now.
func (p *pending) expire(now time.Time) {
	n := 0
	for n < len(p.queue) && !p.queue[n].expires.After(now) {
		n++
	}
	p.queue = slices.Delete(p.queue, 0, n)
}
