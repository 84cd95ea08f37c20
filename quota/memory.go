package quota

import (
	"context"
	"hash/maphash"
	"sort"
	"sync"
	"time"
)

// Memory is a quota store held in this process, with the same semantics as
// Redis: for a service with a single process, and as the reference model
// that Redis is tested against. It keeps the plain log with a running total
// on each entry, so a window's sum, its oldest charge and the time a cost
// fits are each a search: a decision is O(log n), and entries leave the log
// without a copy. Callers are spread over shards, each with its own lock,
// so that charges of different callers on different cores do not wait for
// one another.
type Memory struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [memShards]memShard
}

// memShards is the number of shards of a Memory: a power of two, and
// enough that few of a machine's cores meet on one lock.
const memShards = 32

// memShard holds the identities that hash to it.
type memShard struct {
	mu       sync.Mutex
	logs     map[string]*memLog
	counters map[string]map[string]memCounter // identity -> period limit -> its count
	calls    int
	_        [64]byte // keeps the locks of two shards off one cache line
}

// memCounter is the count of one period limit, as the script keeps it.
type memCounter struct{ start, end, used int64 }

type memLog struct {
	entries []memEntry  // in admit order, which is time order: a window of buf
	buf     []memEntry  // the array entries live in, whole
	first   int64       // the index of entries[0], counted since the log began, as in Redis
	expires int64       // microseconds: one longest window after the last admit, like a Redis key's TTL
	last    int64       // the latest time seen
	cursors []memCursor // where the windows shorter than the longest start
}

// memCursor remembers where a window of length w started, as an index
// counted since the log began: windows only move forward, so the next
// search starts there.
type memCursor struct{ w, start int64 }

// maxCursors bounds the cursors a log keeps: plans have a few windows.
const maxCursors = 8

// memEntry is one admitted charge (cost 0 once refunded); cum is the total
// cost of the log up to and including it, so any window's sum is a
// difference of two cums.
type memEntry struct{ at, cost, cum int64 }

// sweepEvery is how many calls pass between sweeps of expired identities.
const sweepEvery = 4096

// NewMemory returns an empty in-process store. now is its clock; nil means
// time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	m := &Memory{now: now, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].logs = make(map[string]*memLog)
		m.shards[i].counters = make(map[string]map[string]memCounter)
	}
	return m
}

// InProcess reports that the store answers without I/O: a caller need not
// bound its calls by a time budget.
func (m *Memory) InProcess() bool { return true }

// shard returns the shard of identity.
func (m *Memory) shard(identity string) *memShard {
	return &m.shards[maphash.String(m.seed, identity)%memShards]
}

// Allow charges a cost of 1: see Charge.
func (m *Memory) Allow(ctx context.Context, identity string, plan Plan) (Decision, error) {
	return m.Charge(ctx, identity, plan, 1)
}

// Charge admits cost units for identity if they fit in every limit of plan:
// see Redis.Charge, whose contract it shares. Its only errors are a
// *TooCostlyError and one matching ErrInvalid.
func (m *Memory) Charge(_ context.Context, identity string, plan Plan, cost int64) (Decision, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, err
	}
	return m.run(identity, plan, cost, true), nil
}

// Peek returns the usage of identity under plan without charging anything.
// Its only error matches ErrInvalid: a bad identity or plan.
func (m *Memory) Peek(_ context.Context, identity string, plan Plan) (Decision, error) {
	if err := checkPeek(identity, plan); err != nil {
		return Decision{}, err
	}
	return m.run(identity, plan, 0, false), nil
}

func (m *Memory) run(identity string, plan Plan, cost int64, record bool) Decision {
	clock := m.now()
	s := m.shard(identity)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(clock.UnixMicro())

	lg, known := s.logs[identity]
	if !known {
		lg = &memLog{}
	}
	// Time never runs back, as in the Redis script.
	lg.last = max(lg.last, clock.UnixMicro())
	now := lg.last
	// The usage of up to 8 limits is kept on the stack.
	var rawArr [8]limitUsage
	raw := rawArr[:]
	if len(plan.Limits) > len(rawArr) {
		raw = make([]limitUsage, len(plan.Limits))
	}
	raw = raw[:len(plan.Limits)]
	sliding, periods := plan.split()
	keep := plan.keep().Microseconds()

	fits := lg.measure(plan, sliding, keep, now, cost, raw)
	counts, countsFit := s.periodCounts(identity, plan, periods, clock, now, cost)
	allowed := fits && countsFit
	index := int64(-1)
	admitted := allowed && record
	if admitted {
		index = lg.admit(plan, sliding, keep, now, cost, raw)
		s.countPeriods(identity, plan, periods, counts, cost)
	}
	marks := newPeriodMarks(len(periods))
	for k, i := range periods {
		raw[i] = periodUsage(plan.Limits[i], counts[k].used, counts[k].end, cost, admitted)
		marks[k] = periodMark{name: plan.Limits[i].Name, start: counts[k].start}
	}
	switch {
	case lg.weight() == 0:
		delete(s.logs, identity) // as the script deletes a log with nothing in any window
	case !known:
		s.logs[identity] = lg
	}
	return decide(identity, plan, cost, allowed, now, index, raw, marks)
}

// measure fills raw with the usage of each sliding window of plan at now
// and reports whether cost fits in all of them. What has left the plan's
// history (keep: its longest window, or longer) has left every window of
// every plan the identity is charged under: dropped first. What remains
// may reach beyond this plan's windows; each starts where its cursor
// finds it.
func (lg *memLog) measure(plan Plan, sliding []int, keep, now, cost int64, raw []limitUsage) bool {
	lg.trim(now - keep)
	fits := true
	for _, i := range sliding {
		l := plan.Limits[i]
		w := l.Window.Microseconds()
		in := 0
		if w < keep {
			in = lg.windowStart(w, now-w)
		}
		raw[i] = lg.usage(in, cost-l.Max, w)
		fits = fits && raw[i].used+cost <= l.Max
	}
	return fits
}

// admit records a charge of cost at now, in every window of raw, and
// returns its index.
func (lg *memLog) admit(plan Plan, sliding []int, keep, now, cost int64, raw []limitUsage) int64 {
	index := lg.first + int64(len(lg.entries))
	lg.push(memEntry{at: now, cost: cost, cum: lg.total() + cost}) // time never runs back: still in order
	lg.expires = now + keep
	for _, i := range sliding {
		// The new entry is in every window; it is the oldest only of an
		// empty one.
		raw[i].used += cost
		if raw[i].oldest < 0 {
			raw[i].oldest = now
		}
	}
	return index
}

// periodCounts returns identity's counter of each calendar period of plan
// at now (clock, in the plan's time zone), and whether cost fits in all.
func (s *memShard) periodCounts(identity string, plan Plan, periods []int, clock time.Time, now, cost int64) ([]memCounter, bool) {
	counts := make([]memCounter, len(periods))
	fits := true
	for k, i := range periods {
		l := plan.Limits[i]
		start, end := l.Period.spanAt(clock, plan.location()).pick(now)
		counts[k] = memCounter{start: start, end: end}
		if c, ok := s.counters[identity][l.Name]; ok && c.start == start {
			counts[k].used = c.used
		}
		fits = fits && counts[k].used+cost <= l.Max
	}
	return counts, fits
}

// countPeriods adds cost to each of identity's period counters.
func (s *memShard) countPeriods(identity string, plan Plan, periods []int, counts []memCounter, cost int64) {
	if len(periods) > 0 && s.counters[identity] == nil {
		s.counters[identity] = make(map[string]memCounter)
	}
	for k, i := range periods {
		counts[k].used += cost
		s.counters[identity][plan.Limits[i].Name] = counts[k]
	}
}

// usage measures the window of length w that holds the entries from index
// in on. excess is cost - max: when used exceeds it, the cost does not fit,
// and freeAt is when enough weight will have left (window w later than the
// entry whose departure covers the excess).
func (lg *memLog) usage(in int, excess, w int64) limitUsage {
	u := limitUsage{oldest: -1, freeAt: -1}
	es := lg.entries
	if in == len(es) {
		return u
	}
	before := es[in].cum - es[in].cost
	u.used = lg.total() - before
	if u.used > 0 {
		u.oldest = es[firstAbove(es, in, before)].at // refunded entries are not the oldest
	}
	if need := u.used + excess; need > 0 {
		u.freeAt = es[firstAbove(es, in, before+need-1)].at + w
	}
	return u
}

// firstAfter returns the index of the first entry admitted after cut, or
// len(es). It gallops from the front, then bisects: the entries a call
// passes over are the few that have just left a window, so the answer is
// most often found in a step or two rather than in log n.
func firstAfter(es []memEntry, cut int64) int {
	lo, hi := 0, 1
	for hi <= len(es) && es[hi-1].at <= cut {
		lo, hi = hi, 2*hi
	}
	// es[lo-1] is at or before cut; the answer is in [lo, min(hi, len)].
	for hi = min(hi, len(es)); lo < hi; {
		mid := int(uint(lo+hi) >> 1)
		if es[mid].at > cut {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// windowStart returns the index of the first entry admitted after cut, for
// the window of length w. Time never runs back in a log, so a window's
// start only moves forward: the search gallops from where the window
// started last time, a step or two on, amortised O(1) a charge.
func (lg *memLog) windowStart(w, cut int64) int {
	var c *memCursor
	for k := range lg.cursors {
		if lg.cursors[k].w == w {
			c = &lg.cursors[k]
			break
		}
	}
	if c == nil {
		if len(lg.cursors) == maxCursors {
			lg.cursors = lg.cursors[:0] // a caller whose plans keep changing
		}
		lg.cursors = append(lg.cursors, memCursor{w: w, start: lg.first})
		c = &lg.cursors[len(lg.cursors)-1]
	}
	from := min(int(max(c.start-lg.first, 0)), len(lg.entries))
	i := from + firstAfter(lg.entries[from:], cut)
	c.start = lg.first + int64(i)
	return i
}

// firstAbove returns the index of the first entry from i on whose cum
// passes total: the entry that brings the log's running total above it. It
// is most often es[i] itself (an entry not refunded), so that is tried
// before a bisection.
func firstAbove(es []memEntry, i int, total int64) int {
	if es[i].cum > total {
		return i
	}
	return i + sort.Search(len(es)-i, func(k int) bool { return es[i+k].cum > total })
}

// total is the cum of the newest entry.
func (lg *memLog) total() int64 {
	if len(lg.entries) == 0 {
		return 0
	}
	return lg.entries[len(lg.entries)-1].cum
}

// weight is the cost of all the entries.
func (lg *memLog) weight() int64 {
	if len(lg.entries) == 0 {
		return 0
	}
	return lg.total() - (lg.entries[0].cum - lg.entries[0].cost)
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

// push appends e. Entries leave from the front (trim) and arrive at the
// back, so when the back reaches the end of buf the log slides down to its
// start: an identity at a steady rate reuses one array rather than
// allocating a new one every few hundred charges. buf is made anew, twice
// the log, when the log fills more than half of it (here) or less than a
// quarter (trim, after a burst).
func (lg *memLog) push(e memEntry) {
	if n := len(lg.entries); n == cap(lg.entries) {
		if size := cap(lg.buf); size == 0 || 2*n > size {
			lg.buf = make([]memEntry, max(2*n, minLogBuf))
		}
		lg.entries = lg.buf[:copy(lg.buf, lg.entries)]
	}
	lg.entries = append(lg.entries, e)
}

// minLogBuf is the smallest array a log keeps.
const minLogBuf = 8

// trim drops the entries admitted at or before cut, without a copy: push
// slides the rest down when it next needs room, amortised O(1) an entry.
func (lg *memLog) trim(cut int64) {
	k := firstAfter(lg.entries, cut)
	lg.entries = lg.entries[k:]
	lg.first += int64(k)
	if n := len(lg.entries); cap(lg.buf) > minLogBuf && 4*n < cap(lg.buf) {
		lg.buf = make([]memEntry, max(2*n, minLogBuf))
		lg.entries = lg.buf[:copy(lg.buf, lg.entries)]
	}
}

// sweep drops expired identities now and then, so idle ones vanish as their
// Redis keys would.
func (s *memShard) sweep(now int64) {
	s.calls++
	if s.calls%sweepEvery != 0 {
		return
	}
	for id, lg := range s.logs {
		if now >= lg.expires {
			delete(s.logs, id)
		}
	}
	for id, cs := range s.counters {
		for name, c := range cs {
			if now >= c.end {
				delete(cs, name)
			}
		}
		if len(cs) == 0 {
			delete(s.counters, id)
		}
	}
}

// Refund removes an admitted charge: see Redis.Refund. Its only error
// matches ErrInvalid: the zero Receipt.
func (m *Memory) Refund(ctx context.Context, rc Receipt) (bool, error) {
	_, ok, err := m.Settle(ctx, rc, 0)
	return ok, err
}

// Settle lowers an admitted charge to the actual cost: see Redis.Settle.
// It recounts the running totals of the charges after it. Its only error
// matches ErrInvalid: the zero Receipt, or actual outside [0, rc.Cost()].
func (m *Memory) Settle(_ context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	if err := checkSettle(rc, actual); err != nil {
		return Receipt{}, false, err
	}
	s := m.shard(rc.identity)
	s.mu.Lock()
	defer s.mu.Unlock()
	lg := s.logs[rc.identity]
	if lg == nil {
		return Receipt{}, false, nil
	}
	i := rc.index - lg.first
	if i < 0 || i >= int64(len(lg.entries)) || lg.entries[i].at != rc.at || lg.entries[i].cost != rc.cost {
		return Receipt{}, false, nil
	}
	if actual != rc.cost {
		// The periods the charge was counted in give back the difference
		// too, if they are still the counters' periods.
		for _, p := range rc.marks() {
			if c, ok := s.counters[rc.identity][p.name]; ok && c.start == p.start {
				c.used = max(c.used-(rc.cost-actual), 0)
				s.counters[rc.identity][p.name] = c
			}
		}
	}
	lg.entries[i].cost = actual
	lg.recount(int(i))
	if actual == 0 {
		return Receipt{}, true, nil
	}
	rc.cost = actual
	return rc, true, nil
}

// Reset forgets every charge of identity. It never fails.
func (m *Memory) Reset(_ context.Context, identity string) error {
	s := m.shard(identity)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.logs, identity)
	delete(s.counters, identity)
	return nil
}
