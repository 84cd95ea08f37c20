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

// shardIndex returns the index of identity's shard.
func (m *Memory) shardIndex(identity string) int {
	return int(maphash.String(m.seed, identity) % memShards)
}

// shard returns the shard of identity.
func (m *Memory) shard(identity string) *memShard { return &m.shards[m.shardIndex(identity)] }

// shardSet is the shards of the parts of a charge, each once, in index
// order.
type shardSet struct {
	idx [1 + MaxShared]int
	n   int
}

// add adds shard i, keeping the set in index order.
func (ss *shardSet) add(i int) {
	k := 0
	for k < ss.n && ss.idx[k] < i {
		k++
	}
	if k < ss.n && ss.idx[k] == i {
		return
	}
	copy(ss.idx[k+1:ss.n+1], ss.idx[k:ss.n])
	ss.idx[k] = i
	ss.n++
}

// lock locks the shards in index order: two charges whose parts share
// shards take them in the same order, so neither can hold a shard the
// other waits for while it waits for one the other holds.
func (ss *shardSet) lock(m *Memory) {
	for _, i := range ss.idx[:ss.n] {
		m.shards[i].mu.Lock()
	}
}

func (ss *shardSet) unlock(m *Memory) {
	for k := ss.n - 1; k >= 0; k-- {
		m.shards[ss.idx[k]].mu.Unlock()
	}
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

// memPart is one part of a charge (see Plan.parts): an identity's log
// and counters, under its own plan.
type memPart struct {
	identity         string
	plan             Plan
	shard            *memShard
	lg               *memLog
	known            bool // whether the shard held lg
	sliding, periods []int
	keep             int64        // the plan's history, microseconds
	raw              []limitUsage // its limits' usage, within the decision's
	counts           []memCounter
}

// run decides a charge (a peek unless record) as the charge script does:
// each part's log is measured, at one time (the latest of the clock and
// of every log's), and the cost is recorded in every part if it fits in
// all of them, in none otherwise. The shards of the parts stay locked
// throughout, so the decision is atomic.
func (m *Memory) run(identity string, plan Plan, cost int64, record bool) Decision {
	clock := m.now()
	var partsArr [1 + MaxShared]memPart
	parts := partsArr[:plan.parts()]
	var shards shardSet
	for k := range parts {
		id := plan.partIdentity(identity, k)
		i := m.shardIndex(id)
		parts[k] = memPart{identity: id, plan: plan.partPlan(k), shard: &m.shards[i]}
		shards.add(i)
	}
	shards.lock(m)
	defer shards.unlock(m)

	// Time never runs back, as in the Redis script: now is the latest of
	// the clock and of every part's log.
	now := clock.UnixMicro()
	for _, i := range shards.idx[:shards.n] {
		m.shards[i].sweep(now)
	}
	for k := range parts {
		p := &parts[k]
		if p.lg, p.known = p.shard.logs[p.identity]; !p.known {
			p.lg = &memLog{}
		}
		now = max(now, p.lg.last)
	}
	// The usage of up to 8 limits is kept on the stack.
	var rawArr [8]limitUsage
	raw := rawArr[:]
	if n := plan.limitCount(); n > len(rawArr) {
		raw = make([]limitUsage, n)
	}
	raw = raw[:plan.limitCount()]

	allowed := true
	for k, off := 0, 0; k < len(parts); k++ {
		p := &parts[k]
		p.lg.last = now
		p.sliding, p.periods = p.plan.split()
		p.keep = p.plan.keep().Microseconds()
		p.raw = raw[off : off+len(p.plan.Limits)]
		off += len(p.plan.Limits)
		fits := p.lg.measure(p.plan, p.sliding, p.keep, now, cost, p.raw)
		counts, countsFit := p.shard.periodCounts(p.identity, p.plan, p.periods, clock, now, cost)
		p.counts = counts
		allowed = allowed && fits && countsFit
	}

	admitted := allowed && record
	var outsArr [1 + MaxShared]partOutcome
	outs := outsArr[:len(parts)]
	for k := range parts {
		p := &parts[k]
		outs[k].index = -1
		if admitted {
			outs[k].index = p.lg.admit(p.plan, p.sliding, p.keep, now, cost, p.raw)
			p.shard.countPeriods(p.identity, p.plan, p.periods, p.counts, cost)
		}
		outs[k].marks = newPeriodMarks(len(p.periods))
		for j, i := range p.periods {
			p.raw[i] = periodUsage(p.plan.Limits[i], p.counts[j].used, p.counts[j].end, cost, admitted)
			outs[k].marks[j] = periodMark{name: p.plan.Limits[i].Name, start: p.counts[j].start}
		}
		switch {
		case p.lg.weight() == 0:
			delete(p.shard.logs, p.identity) // as the script deletes a log with nothing in any window
		case !p.known:
			p.shard.logs[p.identity] = p.lg
		}
	}
	return decide(identity, plan, cost, allowed, now, raw, outs)
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
// at now (clock, in the plan's time zone), and whether cost fits in all
// (a soft one always does).
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
		fits = fits && (l.Soft || counts[k].used+cost <= l.Max)
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
	var shards shardSet
	for k := range rc.parts() {
		shards.add(m.shardIndex(rc.part(k).identity))
	}
	shards.lock(m)
	defer shards.unlock(m)
	found := false
	for k := range rc.parts() {
		if m.settle(rc.part(k), actual) {
			found = true
		}
	}
	switch {
	case !found:
		return Receipt{}, false, nil
	case actual == 0:
		return Receipt{}, true, nil
	}
	return rc.withCost(actual), true, nil
}

// settle lowers the charge of one part to actual, its shard locked, and
// reports whether it found it.
func (m *Memory) settle(rc Receipt, actual int64) bool {
	s := m.shard(rc.identity)
	lg := s.logs[rc.identity]
	if lg == nil {
		return false
	}
	i := rc.index - lg.first
	if i < 0 || i >= int64(len(lg.entries)) || lg.entries[i].at != rc.at || lg.entries[i].cost != rc.cost {
		return false
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
	return true
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
