package history

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// Recorder keeps every event of the stores it wraps. It is safe for
// concurrent use. It holds the whole history in memory, a few hundred bytes
// a charge.
type Recorder struct {
	mu        sync.Mutex
	h         History
	byReceipt map[quota.Receipt]int // a receipt, as charged or as settled, to its charge
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{byReceipt: make(map[quota.Receipt]int)}
}

// Store returns s with every charge, refund, settlement and reset made
// through it recorded in r as server's. Peeks pass through unrecorded.
func (r *Recorder) Store(server string, s quota.Store) quota.Store {
	return &recorded{Store: s, server: server, rec: r}
}

// Fault records a fault that happened between start and end, for every
// identity when identity is "".
func (r *Recorder) Fault(kind, identity string, start, end time.Time) {
	r.fault(Fault{Kind: kind, Identity: identity, Start: start, End: end})
}

func (r *Recorder) fault(f Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Faults = append(r.h.Faults, f)
}

// History returns what was recorded so far. The recorder only appends to
// its history, so it may go on recording while the one returned is read;
// do not modify its events.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{
		Charges:   slices.Clip(r.h.Charges),
		Givebacks: slices.Clip(r.h.Givebacks),
		Faults:    slices.Clip(r.h.Faults),
	}
}

func (r *Recorder) charge(c Charge, rc quota.Receipt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.ID = len(r.h.Charges)
	r.h.Charges = append(r.h.Charges, c)
	if c.Outcome == Made {
		r.byReceipt[rc] = c.ID
	}
}

// giveback records a refund or settlement of rc; one of a receipt the
// recorder never saw (made through another store) is not recorded.
func (r *Recorder) giveback(g Giveback, rc, settled quota.Receipt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.byReceipt[rc]
	if !ok {
		return
	}
	g.Charge = id
	r.h.Givebacks = append(r.h.Givebacks, g)
	if g.Outcome == Made && !settled.IsZero() {
		r.byReceipt[settled] = id
	}
}

// recorded is a quota.Store whose calls a Recorder keeps.
type recorded struct {
	quota.Store
	server string
	rec    *Recorder
}

var _ quota.Store = (*recorded)(nil)

func (s *recorded) Charge(ctx context.Context, identity string, plan quota.Plan, cost int64) (quota.Decision, error) {
	sent := time.Now()
	d, err := s.Store.Charge(ctx, identity, plan, cost)
	c := Charge{Server: s.server, Identity: identity, Plan: plan, Cost: cost, Sent: sent, Answered: time.Now()}
	switch {
	case err == nil && d.Allowed:
		c.Outcome, c.At, c.Periods = Made, d.Receipt.At(), d.Receipt.Periods()
	case err == nil, errors.Is(err, quota.ErrLate), errors.Is(err, quota.ErrInvalid), errors.Is(err, quota.ErrTooCostly):
		c.Outcome = NotMade
	default:
		c.Outcome = Unknown
		c.MadeBy, _ = ctx.Deadline()
	}
	if err == nil {
		c.Used, c.Binding = make([]int64, len(d.Limits)), d.Binding
		for i, l := range d.Limits {
			c.Used[i] = l.Used
		}
	}
	s.rec.charge(c, d.Receipt)
	return d, err
}

func (s *recorded) Refund(ctx context.Context, rc quota.Receipt) (bool, error) {
	sent := time.Now()
	ok, err := s.Store.Refund(ctx, rc)
	s.rec.giveback(Giveback{Server: s.server, Actual: 0, Outcome: outcome(ok, err), Sent: sent, Answered: time.Now()}, rc, quota.Receipt{})
	return ok, err
}

func (s *recorded) Settle(ctx context.Context, rc quota.Receipt, actual int64) (quota.Receipt, bool, error) {
	sent := time.Now()
	got, ok, err := s.Store.Settle(ctx, rc, actual)
	s.rec.giveback(Giveback{Server: s.server, Actual: actual, Outcome: outcome(ok, err), Sent: sent, Answered: time.Now()}, rc, got)
	return got, ok, err
}

// Reset forgets identity's charges: recorded as a fault of identity alone,
// an uncertain one if it failed (it may have been made).
func (s *recorded) Reset(ctx context.Context, identity string) error {
	start := time.Now()
	err := s.Store.Reset(ctx, identity)
	s.rec.fault(Fault{Kind: "reset", Identity: identity, Start: start, End: time.Now(), Uncertain: err != nil})
	return err
}

func outcome(ok bool, err error) Outcome {
	switch {
	case errors.Is(err, quota.ErrInvalid):
		return NotMade
	case err != nil:
		return Unknown
	case ok:
		return Made
	}
	return NotMade
}
