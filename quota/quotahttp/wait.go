package quotahttp

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// The caps of the waiting requests of a gate (WithMaxWaiters), unless set.
const (
	DefaultMaxWaiters            = 1024
	DefaultMaxWaitersPerIdentity = 8
)

// WithMaxWait makes the gate hold a request that the quota refuses, when
// the same cost fits again within d (its Retry-After is at most d), instead
// of answering 429 at once: it waits server-side and is charged in its
// turn, then served. Each caller's waiters are charged first come, first
// served: a request that arrives while others of its caller wait queues
// behind them without a charge; only the first in line tries again, when
// its Retry-After has passed, and the next tries once it is admitted or
// leaves. Nothing is charged before the store admits it. A request whose
// wait runs out is charged or refused as it stands then; one whose client
// goes away, or whose context ends, leaves the line uncharged and is
// answered with the context's error. A cost that can never fit the plan
// (a 422) or that fits only after d (a month spent) is refused at once, and
// so is a request beyond the caps (WithMaxWaiters). The order holds among
// the requests of one gate; requests of one caller on several servers each
// wait in their own server's line, and the store keeps every limit exact
// across them.
//
// A waiting request holds its connection, its goroutine (a few KB of
// stack) and a timer for up to d, and whatever the service holds around
// the gate; not its hold (Request.Hold), taken with the charge that admits
// it. The caps bound them. 0, the
// default, waits for nothing. Shadow mode never waits: it refuses nothing.
func WithMaxWait(d time.Duration) Option {
	return func(g *Gate) { g.maxWait = max(d, 0) }
}

// WithMaxWaiters caps the requests waiting at once (see WithMaxWait):
// perServer across the gate and perIdentity of one caller (defaults
// DefaultMaxWaiters and DefaultMaxWaitersPerIdentity; a value below 1
// keeps its default). A request refused while the caps are full is
// answered 429 at once.
func WithMaxWaiters(perServer, perIdentity int) Option {
	return func(g *Gate) {
		if perServer > 0 {
			g.maxWaiters = perServer
		}
		if perIdentity > 0 {
			g.maxWaitersPer = perIdentity
		}
	}
}

// waiters are the lines of the requests waiting to be charged, one a
// caller, each first come, first served.
type waiters struct {
	max                    time.Duration
	perServer, perIdentity int
	mu                     sync.Mutex
	total                  int
	lines                  map[string][]*waiter
}

// waiter is one request in a line; turn is closed when it is first.
type waiter struct{ turn chan struct{} }

func newWaiters(maxWait time.Duration, perServer, perIdentity int) *waiters {
	return &waiters{max: maxWait, perServer: perServer, perIdentity: perIdentity, lines: make(map[string][]*waiter)}
}

// enter puts a waiter at the end of identity's line: nil if the caps are
// full, or if behind is set and no one waits (the request need not queue).
func (q *waiters) enter(identity string, behind bool) *waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	line := q.lines[identity]
	if (behind && len(line) == 0) || q.total >= q.perServer || len(line) >= q.perIdentity {
		return nil
	}
	w := &waiter{turn: make(chan struct{})}
	if len(line) == 0 {
		close(w.turn)
	}
	q.lines[identity] = append(line, w)
	q.total++
	return w
}

// leave takes w out of identity's line; if it was first, the next has its
// turn.
func (q *waiters) leave(identity string, w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	line := q.lines[identity]
	i := slices.Index(line, w)
	if i < 0 {
		return
	}
	q.total--
	if line = slices.Delete(line, i, i+1); len(line) == 0 {
		delete(q.lines, identity)
		return
	}
	q.lines[identity] = line
	if i == 0 {
		close(line[0].turn)
	}
}

// admit charges the request, waiting its turn and for its Retry-After, up
// to the gate's longest wait, where the quota refuses a cost that fits
// within it (see WithMaxWait). It returns the last decision, how long the
// request waited and, for a request that gave up waiting, its context's
// error. The observer is told when it joins the line (EventWaiting).
func (g *Gate) admit(r *http.Request, m *metering) (quota.Decision, time.Duration, error) {
	ctx, q := r.Context(), g.waits
	identity, plan, cost := m.Identity, m.Plan, m.Cost
	if q == nil {
		d, err := g.charge(ctx, m)
		return d, 0, err
	}
	var d quota.Decision // a denial to wait out, once decided
	decided := false
	w := q.enter(identity, true) // behind those of the caller who wait
	if w == nil {
		var err error
		if d, err = g.charge(ctx, m); err != nil || d.Allowed || d.RetryAfter > q.max {
			return d, 0, err
		}
		decided = true
		if w = q.enter(identity, false); w == nil {
			return d, 0, nil // the caps are full: refused at once
		}
	}
	defer q.leave(identity, w)
	g.observe(r, Event{Kind: EventWaiting, Identity: identity, Plan: plan, Cost: cost, Decision: d})
	start := time.Now()
	deadline := start.Add(q.max)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-w.turn:
	case <-ctx.Done():
		return quota.Decision{}, time.Since(start), ctx.Err()
	case <-timer.C:
		// The wait ran out in the line: charged or refused as it stands.
		d, err := g.charge(ctx, m)
		return d, time.Since(start), err
	}
	for {
		if !decided {
			var err error
			if d, err = g.charge(ctx, m); err != nil || d.Allowed {
				return d, time.Since(start), err
			}
		}
		if time.Now().Add(d.RetryAfter).After(deadline) {
			return d, time.Since(start), nil
		}
		timer.Reset(d.RetryAfter)
		select {
		case <-ctx.Done():
			return quota.Decision{}, time.Since(start), ctx.Err()
		case <-timer.C:
			decided = false
		}
	}
}
