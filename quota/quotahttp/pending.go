package quotahttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// DefaultPendingLimit is the most refunds and charges a gate owes the
// store at once unless WithPendingLimit sets another.
const DefaultPendingLimit = 10_000

// pendingLife is how long a refund or charge the store did not answer is
// tried again: then it is given up. It is well within
// quota.OverdraftIDLife, so a charge is never retried once Redis may have
// forgotten that it made it.
const pendingLife = 10 * time.Minute

// The wait before trying the store again after it failed, doubled after
// each failure up to lastRetry.
const firstRetry, lastRetry = 100 * time.Millisecond, 3200 * time.Millisecond

// overdrafter is a store that can charge a request already served, in
// every limit whether it fits or not, once per id: quota.Redis, and a
// quota.DenyCache in front of it.
type overdrafter interface {
	ChargeOverdraft(ctx context.Context, identity string, plan quota.Plan, cost int64, id string) (quota.Decision, bool, error)
}

var (
	_ overdrafter = (*quota.Redis)(nil)
	_ overdrafter = (*quota.DenyCache)(nil)
)

// owed is a refund or a charge the store did not answer in time, or a
// settlement made in the background (SettleLater).
type owed struct {
	r *http.Request // detached: for the observer
	// m is the request's metering: a refund gives back its receipt, a
	// settlement lowers it.
	m Metering
	// id names a pending charge of cost units; "" for a refund or a
	// settlement.
	id    string
	cost  int64
	since time.Time
	// settle marks a settlement of m's receipt down to actual units.
	settle bool
	actual int64
}

// SettleLater lowers the charge of d, a decision of the gate's store for
// identity under plan, to actual units in the background, tried again
// like a refund while the store fails (for up to ten minutes), so that the
// request does not wait for it: a price known only after the charge (a
// cached tile's, cheaper than the miss it was charged as). The observer
// is told (EventSettled, or EventSettleFailed once given up). It reports
// false, having done nothing, when the gate owes its pending limit
// already (WithPendingLimit). r is the request, for the observer.
func (g *Gate) SettleLater(r *http.Request, identity string, plan quota.Plan, d quota.Decision, actual int64) bool {
	if d.Receipt.IsZero() || !g.backlog.reserve() {
		return false
	}
	g.owe(owed{r: detached(r), m: Metering{Identity: identity, Plan: plan, Cost: d.Cost, Decision: d}, settle: true, actual: actual, since: time.Now()})
	return true
}

// backlog holds what a gate owes the store, first owed first, and the one
// goroutine that retries it, which runs while anything is owed: a refund
// whose first attempt failed, the charge of a request served unmetered.
// Its slots are held from the moment a request may owe a charge (before
// its work) until the charge is made or given up, so a request told its
// charge is pending always finds room for it.
type backlog struct {
	mu      sync.Mutex
	queue   []owed
	held    int // slots taken: the queue and the requests that will owe
	limit   int
	running bool // the retrying goroutine
	// ids name pending charges: a prefix random to the gate, then a count.
	idPrefix string
	idSeq    atomic.Int64
}

func newBacklog(limit int) *backlog {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &backlog{limit: limit, idPrefix: hex.EncodeToString(b[:]) + "-"}
}

// reserve takes a slot, and reports false when every slot is taken.
func (b *backlog) reserve() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held >= b.limit {
		return false
	}
	b.held++
	return true
}

// unreserve gives back a slot reserve took that no entry will use.
func (b *backlog) unreserve() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held--
}

// len is the number of entries owed and slots held for them.
func (b *backlog) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// newID names a pending charge, uniquely across gates and servers.
func (b *backlog) newID() string {
	return b.idPrefix + strconv.FormatInt(b.idSeq.Add(1), 10)
}

// detached is what the gate keeps of r while it owes the store for it, to
// tell the observer: its method, URL, host, client address and context
// (never cancelled), not its headers (an API key among them) or body.
func detached(r *http.Request) *http.Request {
	d := &http.Request{Method: r.Method, URL: r.URL, Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor,
		Header: http.Header{}, Body: http.NoBody, Host: r.Host, RemoteAddr: r.RemoteAddr, RequestURI: r.RequestURI}
	return d.WithContext(context.WithoutCancel(r.Context()))
}

// owe queues o in a slot reserve took, and starts the retrying goroutine
// unless it runs.
func (g *Gate) owe(o owed) {
	b := g.backlog
	b.mu.Lock()
	b.queue = append(b.queue, o)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go g.retry()
	}
}

// retry tries what the gate owes, first owed first, until nothing is left.
// A failure of the store waits before trying again (the store is down for
// the rest of the queue too), longer after each failure in a row.
func (g *Gate) retry() {
	b := g.backlog
	wait := firstRetry
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.queue, b.running = nil, false
			b.mu.Unlock()
			return
		}
		o := b.queue[0]
		b.mu.Unlock()
		if !g.attempt(o) {
			time.Sleep(wait)
			wait = min(2*wait, lastRetry)
			continue
		}
		wait = firstRetry
		b.mu.Lock()
		b.queue[0] = owed{}
		b.queue = b.queue[1:]
		b.held--
		b.mu.Unlock()
	}
}

var (
	errPendingFull  = errors.New("quotahttp: the gate owes the store too much already")
	errPendingSpent = errors.New("quotahttp: the store failed every try for " + pendingLife.String())
)

// attempt tries o once, and reports whether it is done with: made, or
// given up (too old, or refused by the store as invalid).
func (g *Gate) attempt(o owed) bool {
	old := time.Since(o.since) > pendingLife
	if o.settle {
		return g.settleOnce(o, old)
	}
	if o.id == "" {
		if old {
			g.observe(o.r, Event{Kind: EventRefundAbandoned, Identity: o.m.Identity, Plan: o.m.Plan, Cost: o.m.Cost, Err: errPendingSpent})
			return true
		}
		err := g.refundOnce(o.r.Context(), o.r, o.m)
		return err == nil || errors.Is(err, quota.ErrInvalid)
	}
	e := Event{Kind: EventChargeApplied, Identity: o.m.Identity, Plan: o.m.Plan, Cost: o.m.Cost, Units: o.cost}
	if old {
		e.Kind, e.Err = EventChargeDropped, errPendingSpent
		g.observe(o.r, e)
		return true
	}
	var made bool
	var d quota.Decision
	err := g.call(o.r.Context(), func(ctx context.Context) error {
		var err error
		d, made, err = g.overdraft.ChargeOverdraft(ctx, o.m.Identity, o.m.Plan, o.cost, o.id)
		return err
	})
	switch {
	case errors.Is(err, quota.ErrInvalid), errors.Is(err, quota.ErrTooCostly):
		e.Kind, e.Err = EventChargeDropped, err
	case err != nil:
		e.Kind, e.Units, e.Err = EventChargeRetryFailed, 0, err
	case !made:
		e.Units = 0 // an earlier try was made, its answer lost
	default:
		e.Overage = d.Receipt.Overage()
	}
	g.observe(o.r, e)
	return e.Kind != EventChargeRetryFailed
}

// settleOnce tries the settlement o once (or gives it up, when old), and
// reports whether it is done with.
func (g *Gate) settleOnce(o owed, old bool) bool {
	rc := o.m.Decision.Receipt
	e := Event{Kind: EventSettled, Identity: o.m.Identity, Plan: o.m.Plan, Cost: o.m.Cost, Units: rc.Cost() - o.actual}
	if old {
		e.Kind, e.Units, e.Err = EventSettleFailed, 0, errPendingSpent
		g.observe(o.r, e)
		return true
	}
	var settled bool
	var lowered quota.Receipt
	err := g.call(o.r.Context(), func(ctx context.Context) error {
		var err error
		lowered, settled, err = g.store.Settle(ctx, rc, o.actual)
		return err
	})
	switch {
	case errors.Is(err, quota.ErrInvalid):
		e.Kind, e.Units, e.Err = EventSettleFailed, 0, err
	case err != nil:
		return false // tried again
	case !settled:
		e.Units = 0 // settled or refunded already
	default:
		e.Overage = rc.Overage() - lowered.Overage()
	}
	g.observe(o.r, e)
	return true
}

// Pending returns how many refunds and charges the gate owes the store:
// those it retries in the background, and the charges of requests served
// unmetered whose work has not ended.
func (g *Gate) Pending() int { return g.backlog.len() }
