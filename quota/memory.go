package quota

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Memory is a quota store held in this process, with the same semantics as
// Redis: for a service with a single process, and as the reference model
// that Redis is tested against. It keeps the plain log with a running total
// on each entry, so a window's sum is a binary search and a subtraction.
type Memory struct {
	now func() time.Time

	mu    sync.Mutex
	logs  map[string]*memLog
	calls int
}

type memLog struct {
	entries []memEntry // in admit order, which is time order
	dup     int64      // the number of charges admitted at time last
	expires int64      // microseconds: one longest window after the last admit, like a Redis key's TTL
	last    int64      // the latest time seen
}

// memEntry is one admitted charge; dup counts the charges admitted before it
// at the same time (see memberOf); cum is the total cost of the log up to
// and including it, so any window's sum is a difference of two cums.
type memEntry struct{ at, dup, cost, cum int64 }

// sweepEvery is how many calls pass between sweeps of expired identities.
const sweepEvery = 4096

// NewMemory returns an empty in-process store. now is its clock; nil means
// time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, logs: make(map[string]*memLog)}
}

// Allow charges a cost of 1: see Charge.
func (m *Memory) Allow(ctx context.Context, identity string, plan Plan) (Decision, error) {
	return m.Charge(ctx, identity, plan, 1)
}

// Charge admits cost units for identity if they fit in every limit of plan:
// see Redis.Charge, whose contract it shares.
func (m *Memory) Charge(_ context.Context, identity string, plan Plan, cost int64) (Decision, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, err
	}
	return m.run(identity, plan, cost, true), nil
}

// Peek returns the usage of identity under plan without charging anything.
func (m *Memory) Peek(_ context.Context, identity string, plan Plan) (Decision, error) {
	if err := checkPeek(identity, plan); err != nil {
		return Decision{}, err
	}
	return m.run(identity, plan, 0, false), nil
}

func (m *Memory) run(identity string, plan Plan, cost int64, record bool) Decision {
	now := m.now().UnixMicro()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)

	lg := m.logs[identity]
	if lg == nil {
		lg = &memLog{}
	}
	// Time never runs back, as in the Redis script.
	if now > lg.last {
		lg.last, lg.dup = now, 0
	}
	now = lg.last
	var wmax int64
	raw := make([]limitUsage, len(plan.Limits))
	allowed := true
	for i, l := range plan.Limits {
		w := l.Window.Microseconds()
		wmax = max(wmax, w)
		raw[i] = lg.usage(now-w, cost-l.Max, w)
		allowed = allowed && raw[i].used+cost <= l.Max
	}
	lg.trim(now - wmax)

	dup := int64(-1)
	if allowed && record {
		dup = lg.dup
		lg.dup++
		lg.entries = append(lg.entries, memEntry{at: now, dup: dup, cost: cost, cum: lg.total() + cost}) // time never runs back: still in order
		lg.expires = now + wmax
		for i := range raw {
			// The new entry is in every window; it is the oldest only of an
			// empty one.
			raw[i].used += cost
			if raw[i].oldest < 0 {
				raw[i].oldest = now
			}
		}
	}
	if len(lg.entries) == 0 {
		delete(m.logs, identity)
	} else {
		m.logs[identity] = lg
	}
	return decide(identity, plan, cost, allowed, now, dup, raw)
}

// usage measures the window that holds the entries admitted after cut. excess
// is cost - max: when used exceeds it, the cost does not fit, and freeAt is
// when enough weight will have left (window w later than the entry whose
// departure covers the excess).
func (lg *memLog) usage(cut, excess, w int64) limitUsage {
	u := limitUsage{oldest: -1, freeAt: -1}
	first := sort.Search(len(lg.entries), func(i int) bool { return lg.entries[i].at > cut })
	in := lg.entries[first:]
	if len(in) > 0 {
		u.used = lg.total() - (in[0].cum - in[0].cost)
		u.oldest = in[0].at
	}
	need := u.used + excess
	for _, e := range in {
		if need <= 0 {
			break
		}
		need -= e.cost
		if need <= 0 {
			u.freeAt = e.at + w
		}
	}
	return u
}

// total is the cum of the newest entry.
func (lg *memLog) total() int64 {
	if len(lg.entries) == 0 {
		return 0
	}
	return lg.entries[len(lg.entries)-1].cum
}

// recount rebuilds the cums from entry i on, after a charge changed.
func (lg *memLog) recount(i int) {
	var cum int64
	if i > 0 {
		cum = lg.entries[i-1].cum
	}
	for ; i < len(lg.entries); i++ {
		cum += lg.entries[i].cost
		lg.entries[i].cum = cum
	}
}

func (lg *memLog) trim(cut int64) {
	first := sort.Search(len(lg.entries), func(i int) bool { return lg.entries[i].at > cut })
	lg.entries = append(lg.entries[:0], lg.entries[first:]...)
}

// sweep drops expired identities now and then, so idle ones vanish as their
// Redis keys would.
func (m *Memory) sweep(now int64) {
	m.calls++
	if m.calls%sweepEvery != 0 {
		return
	}
	for id, lg := range m.logs {
		if now >= lg.expires {
			delete(m.logs, id)
		}
	}
}

// Refund removes an admitted charge: see Redis.Refund.
func (m *Memory) Refund(ctx context.Context, rc Receipt) (bool, error) {
	_, ok, err := m.Settle(ctx, rc, 0)
	return ok, err
}

// Settle lowers an admitted charge to the actual cost: see Redis.Settle.
func (m *Memory) Settle(_ context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	if err := checkSettle(rc, actual); err != nil {
		return Receipt{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	lg := m.logs[rc.identity]
	if lg == nil {
		return Receipt{}, false, nil
	}
	for i, e := range lg.entries {
		if memberOf(e.at, e.dup, e.cost) != rc.member {
			continue
		}
		if actual == 0 {
			lg.entries = append(lg.entries[:i], lg.entries[i+1:]...)
			lg.recount(i)
			return Receipt{}, true, nil
		}
		lg.entries[i].cost = actual
		lg.recount(i)
		return Receipt{identity: rc.identity, member: memberOf(e.at, e.dup, actual), at: rc.at, cost: actual}, true, nil
	}
	return Receipt{}, false, nil
}

// Reset forgets every charge of identity.
func (m *Memory) Reset(_ context.Context, identity string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.logs, identity)
	return nil
}
