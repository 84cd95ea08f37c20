package inflight

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxPending bounds the releases kept to be made again; beyond it the
// oldest is dropped, and its slot comes free when its lease expires.
const maxPending = 1024

// maxPendingPerCall bounds the releases one call carries.
const maxPendingPerCall = 256

// The wait before sending the releases owed again after a failure,
// doubled after each failure up to lastRetry, and the time budget of one
// send.
const (
	firstRetry, lastRetry = 100 * time.Millisecond, 3200 * time.Millisecond
	sendTimeout           = time.Second
)

// pending holds the releases owed: those given to be made in the
// background (Held.Release), those that failed, and the leases of acquires
// and charges that failed after they may have taken their slot, until
// Redis has answered their release or they would have expired anyway.
// Each identity's go with its next acquire, charge or release, which make
// them in the same round trip, and one goroutine sends them all while any
// are owed (send).
type pending struct {
	mu      sync.Mutex
	queue   []pendingLease // oldest first: each lasts one lease, so this is their order of expiry
	dropped int64
	sending bool // the goroutine that sends them runs
}

type pendingLease struct {
	Lease
	expires time.Time
	// due is when a release is sure to reach Redis after the script that
	// may have taken the slot (one whose call failed, its outcome unknown,
	// which Redis may still run until its deadline): a release made before
	// may precede it, so the lease stays owed. Zero for a slot known held.
	due time.Time
}

// add keeps l until a lease time from now, past which it has expired in
// Redis too: it was last renewed before now; due as pendingLease's. It
// reports whether the goroutine that sends them must be started.
func (p *pending) add(l Lease, lease time.Duration, due time.Time) (start bool) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire(now)
	if len(p.queue) == maxPending {
		p.queue = slices.Delete(p.queue, 0, 1)
		p.dropped++
	}
	p.queue = append(p.queue, pendingLease{Lease: l, expires: now.Add(lease), due: due})
	start, p.sending = !p.sending, true
	return start
}

// owed is the releases owed of one identity.
type owed struct {
	identity string
	ids      []string
}

// all returns the releases owed and due, by identity, at most
// maxPendingPerCall of each; with none due, when the next one is, or the
// zero time when none is owed and the goroutine that sends them must stop.
func (p *pending) all() ([]owed, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.expire(now)
	if len(p.queue) == 0 {
		p.sending = false
		return nil, time.Time{}
	}
	var out []owed
	var next time.Time
	at := make(map[string]int)
	for _, l := range p.queue {
		if l.due.After(now) {
			if next.IsZero() || l.due.Before(next) {
				next = l.due
			}
			continue
		}
		i, ok := at[l.identity]
		if !ok {
			i, at[l.identity] = len(out), len(out)
			out = append(out, owed{identity: l.identity})
		}
		if len(out[i].ids) < maxPendingPerCall {
			out[i].ids = append(out[i].ids, l.id)
		}
	}
	return out, next
}

// of returns the ids of identity's pending leases, at most
// maxPendingPerCall, newest first: the identity's last release, the one a
// client that waits for each answer needs made before its next request,
// goes whatever the sender has yet to send.
func (p *pending) of(identity string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		return nil
	}
	p.expire(time.Now())
	var ids []string
	for i := len(p.queue) - 1; i >= 0 && len(ids) < maxPendingPerCall; i-- {
		if l := p.queue[i]; l.identity == identity {
			ids = append(ids, l.id)
		}
	}
	return ids
}

// done forgets the leases of identity with ids, released by a call sent
// at sent, unless they were not due then.
func (p *pending) done(identity string, ids []string, sent time.Time) {
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = slices.DeleteFunc(p.queue, func(l pendingLease) bool {
		return l.identity == identity && !l.due.After(sent) && slices.Contains(ids, l.id)
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

// releaseLater gives l back without waiting: it is owed (pending) until
// the goroutine that sends the releases has made it, or the identity's
// next acquire or release has; due as pendingLease's.
func (r *Redis) releaseLater(l Lease, due time.Time) {
	if r.pending.add(l, r.lease, due) {
		go r.send()
	}
}

// unknown gives back l, whose acquire or charge under ctx failed: Redis
// may have taken the slot, and may still take it until the call's
// deadline (none: until the lease would have ended).
func (r *Redis) unknown(ctx context.Context, l Lease) {
	due, ok := ctx.Deadline()
	if !ok {
		due = time.Now().Add(r.lease)
	}
	r.releaseLater(l, due)
}

// send makes the releases owed, every identity's in one pipeline, until
// none is left; after a failure it waits before the next try, longer
// after each failure in a row. A release whose lease has ended is
// forgotten: its slot is free.
func (r *Redis) send() {
	wait := firstRetry
	for {
		owed, next := r.pending.all()
		if owed == nil {
			if next.IsZero() {
				return
			}
			time.Sleep(time.Until(next))
			continue
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		pipe := r.client.Pipeline()
		cmds := make([]*redis.IntCmd, len(owed))
		for i, o := range owed {
			cmds[i] = pipe.ZRem(ctx, r.key(o.identity), anys(o.ids)...)
		}
		// A pipeline that fails on its connection may leave its commands
		// without an error of their own (go-redis v9.17): then none counts
		// as made, and all are sent again (a ZREM twice is harmless).
		_, err := pipe.Exec(ctx)
		cancel()
		failed := false
		for i, o := range owed {
			if cmds[i].Err() != nil || err != nil && !isReply(err) {
				failed = true
				continue
			}
			r.pending.done(o.identity, o.ids, sent)
		}
		if !failed {
			wait = firstRetry
			continue
		}
		time.Sleep(wait)
		wait = min(2*wait, lastRetry)
	}
}

// isReply reports whether err is an error Redis replied, not one of the
// connection.
func isReply(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply)
}
