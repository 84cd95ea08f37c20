package quota

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/internal/redisclock"
	"github.com/tileapi/tileapi/quota/internal/redislayout"
)

var (
	//go:embed charge.lua
	chargeLua string

	//go:embed settle.lua
	settleLua string

	//go:embed raise.lua
	raiseLua    string
	raiseScript = redis.NewScript(raiseLua)
)

// rediser is what Redis needs of a client: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring or any redis.UniversalClient fit.
type rediser interface {
	redis.Scripter
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoad(ctx context.Context, code string) *redis.StringCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	Pipeline() redis.Pipeliner
}

var (
	_ rediser = (*redis.Client)(nil)
	_ rediser = (*redis.ClusterClient)(nil)
	_ rediser = (redis.UniversalClient)(nil)
)

// DefaultPrefix starts every key Redis writes.
const DefaultPrefix = "quota:"

// Redis is a quota store in Redis: one atomic script a decision, so a limit
// holds exactly across every process that shares the server or cluster.
type Redis struct {
	client rediser
	prefix string
	now    func() time.Time
	offset redisclock.Offset
	source PeriodSource
	// scriptsOnly is set once Redis is found to have no functions: the
	// store then sends its scripts by EVALSHA (library.go).
	scriptsOnly atomic.Bool
}

// PeriodSource holds a durable copy of what identities used in calendar
// periods, such as a ledger in a database that every charge, refund and
// settlement is written to. A Redis store with one asks it for a period's
// units when Redis has no counter for it (a restart without persistence, a
// flush, a new key): the counter is restored before it is charged, once
// across every process (the first restore written wins).
type PeriodSource interface {
	// PeriodUsage returns the units identity used in each of periods.
	PeriodUsage(ctx context.Context, identity string, periods []PeriodKey) ([]int64, error)
}

// PeriodKey names one calendar period of one limit: the limit's name and
// when the period started.
type PeriodKey struct {
	Limit string
	Start time.Time
}

// WithPeriodSource makes the store restore lost counters of calendar
// periods from src (see PeriodSource). Without it a missing counter counts
// from zero.
func WithPeriodSource(src PeriodSource) RedisOption { return func(r *Redis) { r.source = src } }

// RedisOption configures a Redis store.
type RedisOption func(*Redis)

// WithPrefix sets the prefix of every key (default DefaultPrefix). It must
// not contain braces: they would change the Redis Cluster hash slot.
func WithPrefix(prefix string) RedisOption { return func(r *Redis) { r.prefix = prefix } }

// withClock makes the store take the time from now instead of from the Redis
// server. It is for this package's tests, which slide windows exactly
// without sleeping, and so unexported: in production the server's clock
// keeps every process on one timeline.
func withClock(now func() time.Time) RedisOption { return func(r *Redis) { r.now = now } }

// NewRedis returns a store that keeps its state in client.
// It panics if WithPrefix was given braces, a programming error.
func NewRedis(client rediser, opts ...RedisOption) *Redis {
	r := &Redis{client: client, prefix: DefaultPrefix}
	for _, o := range opts {
		o(r)
	}
	if strings.ContainsAny(r.prefix, "{}") {
		panic("quota: key prefix " + strconv.Quote(r.prefix) + " contains a brace")
	}
	return r
}

// Allow charges a cost of 1: see Charge.
func (r *Redis) Allow(ctx context.Context, identity string, plan Plan) (Decision, error) {
	return r.Charge(ctx, identity, plan, 1)
}

// Charge admits cost units for identity if they fit in every limit of plan
// and of its Shared plans, and records them in all of them; a denied
// charge records nothing. A cost
// above a limit's maximum returns a *TooCostlyError; a bad plan or cost an
// error matching ErrInvalid. Both are reported before any I/O. A charge
// that reaches Redis after ctx's deadline returns ErrLate and is not made;
// any other error is Redis's, wrapped (see Store).
func (r *Redis) Charge(ctx context.Context, identity string, plan Plan, cost int64) (Decision, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, err
	}
	d, _, err := r.run(ctx, identity, plan, cost, true, nil, nil)
	return d, err
}

// ChargeWith is Charge with the commands along sent in the same round
// trip, before the charge, in one pipeline: a caller that needs a read
// with its charge (a tile's cache lookup) waits for one answer, not two.
// Each command of along keeps its own result and error; they run whatever
// the decision. sent reports whether they went to Redis: not when the
// charge was refused before any I/O (an error matching ErrInvalid or
// ErrTooCostly). A charge that must restore calendar counters takes a
// second trip, without along.
func (r *Redis) ChargeWith(ctx context.Context, identity string, plan Plan, cost int64, along ...redis.Cmder) (Decision, bool, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, false, err
	}
	return r.run(ctx, identity, plan, cost, true, nil, along)
}

// ChargeHolding is ChargeWith that also takes slot, one of the identity's
// in-flight slots, in the same script: the charge is made only if a slot
// is free, and the slot taken only if the charge is admitted. When every
// slot is held it returns a *SlotsHeldError and changes nothing, but for
// giving back slot.Release and the leases that have ended. A charge that
// reaches Redis after ctx's deadline takes no slot either (ErrLate).
// slot.Release are given back whatever the decision, unless the call
// fails. A malformed slot is an error matching ErrInvalid, before any
// I/O. On a Redis Cluster slot.Key must be in the identity's hash slot.
func (r *Redis) ChargeHolding(ctx context.Context, identity string, plan Plan, cost int64, slot Slot, along ...redis.Cmder) (Decision, bool, error) {
	if err := checkCharge(identity, plan, cost); err != nil {
		return Decision{}, false, err
	}
	if err := slot.check(); err != nil {
		return Decision{}, false, err
	}
	return r.run(ctx, identity, plan, cost, true, &slot, along)
}

// Peek returns the usage of identity under plan without charging anything.
// A bad identity or plan returns an error matching ErrInvalid, before any
// I/O; any other error is Redis's, wrapped.
func (r *Redis) Peek(ctx context.Context, identity string, plan Plan) (Decision, error) {
	if err := checkPeek(identity, plan); err != nil {
		return Decision{}, err
	}
	d, _, err := r.run(ctx, identity, plan, 0, false, nil, nil)
	return d, err
}

// run sends the charge script (a peek unless record), taking slot if not
// nil, with the commands along before it in the same pipeline on its
// first send; sent reports whether they went.
func (r *Redis) run(ctx context.Context, identity string, plan Plan, cost int64, record bool, slot *Slot, along []redis.Cmder) (d Decision, sent bool, err error) {
	c := chargeCall{identity: identity, plan: plan, cost: cost, record: record, deadline: r.deadline(ctx), slot: slot}
	reply, err := r.withRestores(ctx, &c, func() (string, error) {
		keys, args := r.chargeArgs(&c)
		var cmd *redis.Cmd
		if len(along) == 0 || sent {
			cmd = r.runScript(ctx, chargeFn, keys, args...)
		} else {
			sent = true
			pipe := r.client.Pipeline()
			for _, c := range along {
				_ = pipe.Process(ctx, c)
			}
			cmd = r.queueScript(ctx, pipe, chargeFn, keys, args...)
			_, _ = pipe.Exec(ctx) // each command holds its own error
			if err := cmd.Err(); missingScript(err) {
				// Once a server: load the library (or turn to scripts),
				// then call alone.
				r.recoverFunctions(ctx, err)
				cmd = r.runScript(ctx, chargeFn, keys, args...)
			}
		}
		reply, err := cmd.Text()
		if err != nil {
			return "", fmt.Errorf("quota: charge: %w", err)
		}
		return reply, nil
	})
	switch {
	case err != nil:
		return Decision{}, sent, err
	case reply == lateReply:
		return Decision{}, sent, ErrLate
	case slot != nil && strings.HasPrefix(reply, slotReply):
		return Decision{}, sent, slot.held(reply)
	}
	d, err = r.decision(&c, reply)
	return d, sent, err
}

// chargeCall is one decision of the charge script: what it is asked, and
// the units of lost counters to restore (restore, per period of the
// decision's parts in order, when its start is set).
type chargeCall struct {
	identity string
	plan     Plan
	cost     int64
	record   bool
	deadline int64 // see Redis.deadline
	// overdraft raises every max above any sum: the cost is recorded
	// whether it fits or not (ChargeOverdraft).
	overdraft bool
	restore   []restoreValue
	slot      *Slot // taken with the charge; nil for none
}

// withRestores sends a charge with send, and when the script finds
// counters of calendar periods missing, looks their units up (the
// PeriodSource) into c.restore and sends it again: the loop Charge, Peek
// and ChargeOverdraft share. A second miss means a period began in
// between; a third is an error.
func (r *Redis) withRestores(ctx context.Context, c *chargeCall, send func() (string, error)) (string, error) {
	for tries := 0; ; tries++ {
		reply, err := send()
		if err != nil || !strings.HasPrefix(reply, restoreReply) {
			return reply, err
		}
		if tries == 2 {
			return "", fmt.Errorf("quota: charge: the counters of %q are still missing after %d restores", c.identity, tries)
		}
		if err := r.restore(ctx, c, header(reply[len(restoreReply):])); err != nil {
			return "", err
		}
	}
}

// decision reads the charge script's reply: per part, the header as
// written, then, if nothing was admitted, whether the cost fits and when
// it does in each window, then each period's use, start and end. A part's
// log's windows are its plan's sliding ones, then its history window if
// it has one: the reply's fields of the first are in plan order, and the
// last is never read.
func (r *Redis) decision(c *chargeCall, reply string) (Decision, error) {
	var sizes [1 + MaxShared]int // of each part's reply, admitted
	admitted, denied := 0, 0
	for k := range c.plan.parts() {
		p := c.plan.partPlan(k)
		sliding, periods := p.split()
		n := windowCount(p, sliding)
		sizes[k] = 8*headerFields(n) + 24*len(periods)
		admitted += sizes[k]
		denied += sizes[k] + 8*(1+n)
	}
	if len(reply) != admitted && len(reply) != denied {
		return Decision{}, fmt.Errorf("quota: charge: script returned %d bytes, want %d or %d", len(reply), admitted, denied)
	}
	made := len(reply) == admitted
	var rawArr [8]limitUsage
	raw := rawArr[:]
	if n := c.plan.limitCount(); n > len(rawArr) {
		raw = make([]limitUsage, n)
	}
	raw = raw[:c.plan.limitCount()]
	var outsArr [1 + MaxShared]partOutcome
	outs := outsArr[:c.plan.parts()]
	var now int64
	allowed := made
	for k, off := 0, 0; k < len(outs); k++ {
		p := c.plan.partPlan(k)
		sliding, periods := p.split()
		n, np := windowCount(p, sliding), len(periods)
		size, tail := 8*headerFields(n), 24*np
		part := reply[:sizes[k]]
		if !made {
			part = reply[:sizes[k]+8*(1+n)]
		}
		reply = reply[len(part):]
		h, extra, ps := header(part[:size]), header(part[size:len(part)-tail]), header(part[len(part)-tail:])
		now = h.field(redislayout.Last) // the same in every part
		praw := raw[off : off+len(p.Limits)]
		off += len(p.Limits)
		for j, i := range sliding {
			praw[i] = limitUsage{used: h.window(j, redislayout.Sum), oldest: h.window(j, redislayout.Oldest), freeAt: -1}
			if !made {
				praw[i].freeAt = extra.field(2 + j)
			}
		}
		outs[k].marks = newPeriodMarks(np)
		for j, i := range periods {
			used, start, end := ps.field(1+3*j), ps.field(2+3*j), ps.field(3+3*j)
			praw[i] = periodUsage(p.Limits[i], used, end, c.cost, made)
			outs[k].marks[j] = periodMark{name: p.Limits[i].Name, start: start}
		}
		outs[k].index = -1
		if made {
			outs[k].index = h.field(redislayout.First) + h.field(redislayout.Tail) - 1
		} else {
			allowed = extra.field(1) == 1
		}
	}
	if r.now == nil {
		r.offset.Observe(now)
	}
	return decide(c.identity, c.plan, c.cost, allowed, now, raw, outs), nil
}

// restoreValue is the units of a period whose counter Redis lost, as the
// PeriodSource holds them; the zero value asks for them.
type restoreValue struct{ start, used int64 }

// restore looks up the counters the charge script found missing: ask holds
// per missing counter its period (from 1, over the periods of the
// decision's parts in order) and start. It asks the PeriodSource once a
// part, and keeps what to send the script again in c.restore.
func (r *Redis) restore(ctx context.Context, c *chargeCall, ask header) error {
	total := 0
	for k := range c.plan.parts() {
		_, periods := c.plan.partPlan(k).split()
		total += len(periods)
	}
	if c.restore == nil {
		c.restore = make([]restoreValue, total)
	}
	n := len(ask) / 16
	for k, first, q := 0, 0, 0; k < c.plan.parts(); k++ {
		// The asks of part k: its periods are first+1 to first+len(periods).
		p := c.plan.partPlan(k)
		_, periods := p.split()
		var keys []PeriodKey
		var at []int // their indexes in c.restore
		for ; q < n; q++ {
			i, start := int(ask.field(1+2*q)), ask.field(2+2*q)
			if i < 1 || i > total {
				return fmt.Errorf("quota: charge: script asked to restore period %d of %d", i, total)
			}
			if i > first+len(periods) {
				break
			}
			keys = append(keys, PeriodKey{Limit: p.Limits[periods[i-first-1]].Name, Start: time.UnixMicro(start)})
			at = append(at, i-1)
		}
		first += len(periods)
		if len(keys) == 0 {
			continue
		}
		identity := c.plan.partIdentity(c.identity, k)
		units, err := r.source.PeriodUsage(ctx, identity, keys)
		if err != nil {
			return fmt.Errorf("quota: restoring the counters of %q: %w", identity, err)
		}
		if len(units) != len(keys) {
			return fmt.Errorf("quota: restoring the counters of %q: %d units for %d periods", identity, len(units), len(keys))
		}
		for j, i := range at {
			c.restore[i] = restoreValue{start: keys[j].Start.UnixMicro(), used: max(units[j], 0)}
		}
	}
	return nil
}

// The plan's numbers fit in the shape of a header: the shared ones before
// the first window's fields, a limit's within its window's.
const _ = uint(redislayout.Shared-aTTL) + uint(redislayout.Per-aMax)

// chargeArgs returns the keys and arguments of charge.lua for c (see
// charge.lua). The arguments start with the call's numbers (record, cost,
// now, deadline, packed as big-endian doubles, so the script parses no
// number), then the slot's (Slot.args). Then per part: its log's key, and
// its counters' for a plan with periods; its plan's numbers (the a*
// fields), the same at every call, which the script decodes once and
// keeps; then, for a plan with periods, their spans, fields and what to
// do with a missing counter: restore it from c.restore, or else ask for
// it or count from zero.
func (r *Redis) chargeArgs(c *chargeCall) ([]string, []any) {
	call := make([]byte, 0, 8*7)
	for _, v := range []int64{boolNum(c.record), c.cost, r.nowMicros(), c.deadline} {
		call = binary.BigEndian.AppendUint64(call, math.Float64bits(float64(v)))
	}
	keys, args := c.slot.args(make([]string, 0, 1+2*c.plan.parts()), make([]any, 0, 3+4*c.plan.parts()), call)
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	restore := c.restore
	for k := range c.plan.parts() {
		identity, plan := c.plan.partIdentity(c.identity, k), c.plan.partPlan(k)
		sliding, periods := plan.split()
		n := windowCount(plan, sliding)
		tb, cb := recordWidths(plan)
		packed := make([]byte, 8*headerFields(n)) // zeros: 0.0 is all zero bits
		set := func(f int, v int64) { binary.BigEndian.PutUint64(packed[8*(f-1):], math.Float64bits(float64(v))) }
		set(aTB, int64(tb))
		set(aCB, int64(cb))
		set(aN, int64(n))
		set(aPeriods, int64(len(periods)))
		set(aTTL, logTTL(plan).Milliseconds())
		// An overdraft charge, and a soft limit, refuse nothing: their
		// max is above any sum, so the script counts past Max unchanged.
		most := func(l Limit) int64 {
			if c.overdraft || l.Soft {
				return overdraftMax
			}
			return l.Max
		}
		limit := func(j int, window time.Duration, most int64) { // j from 0
			set(redislayout.WindowField(j, aWindow), window.Microseconds())
			set(redislayout.WindowField(j, aMax), most)
		}
		for j, i := range sliding {
			limit(j, plan.Limits[i].Window, most(plan.Limits[i]))
		}
		if plan.historyWindow() {
			limit(len(sliding), plan.History, historyMax)
		}
		keys = append(keys, r.key(identity))
		args = append(args, string(packed))
		if len(periods) == 0 {
			continue
		}
		// The periods: the span of each around this process's clock (the
		// script picks the period that holds Redis's), its max, and its
		// field in the counters.
		keys = append(keys, r.countersKey(identity))
		spans := make([]byte, 0, 8*4*len(periods))
		for _, i := range periods {
			sp := plan.Limits[i].Period.spanAt(now, plan.location())
			for _, v := range []int64{sp.start, sp.end, sp.next, most(plan.Limits[i])} {
				spans = binary.BigEndian.AppendUint64(spans, math.Float64bits(float64(v)))
			}
		}
		args = append(args, string(spans))
		for _, i := range periods {
			args = append(args, plan.Limits[i].Name)
		}
		missing := make([]byte, 0, 16*len(periods))
		for range periods {
			v := restoreValue{used: restoreNone}
			switch {
			case len(restore) > 0 && restore[0].start != 0:
				v = restore[0]
			case r.source != nil:
				v.used = restoreAsk
			}
			if len(restore) > 0 {
				restore = restore[1:]
			}
			missing = binary.BigEndian.AppendUint64(missing, math.Float64bits(float64(v.start)))
			missing = binary.BigEndian.AppendUint64(missing, math.Float64bits(float64(v.used)))
		}
		args = append(args, string(missing))
	}
	return keys, args
}

// deadline is when, in Redis time, a charge must be made for its reply
// to reach the caller before ctx's deadline (redisclock.Offset.Deadline):
// a charge made but answered late would be charged and not served. 0
// (none) with an injected clock.
func (r *Redis) deadline(ctx context.Context) int64 {
	if r.now != nil {
		return 0
	}
	return r.offset.Deadline(ctx)
}

// windowCount is the number of windows the log of plan measures: its
// sliding limits, and its history window if it has one.
func windowCount(plan Plan, sliding []int) int {
	if plan.historyWindow() {
		return len(sliding) + 1
	}
	return len(sliding)
}

// historyMax is the max of the history window: above any sum of costs the
// log can hold, so it refuses nothing.
const historyMax = 1 << 53

// logTTL is the TTL the charge script gives the log of plan: a quarter
// more than the longest a charge is kept, so that the script sets it
// again (PEXPIRE, about 9,000 of Redis's instructions) only once less than
// that is left, about every quarter window, not at every charge. An idle
// log so lives one to one and a quarter longest windows.
func logTTL(plan Plan) time.Duration {
	keep := plan.keep().Truncate(time.Millisecond)
	return keep + keep/4
}

// Refund removes an admitted charge, in every part of it (the plan's
// Shared identities' too), in one script. It reports whether it did in
// any: false means the receipt's charge was already refunded, settled
// away or has expired, so calling it twice is safe; each part is refunded
// once however often it is called. The zero Receipt returns an error matching
// ErrInvalid; any other error is Redis's, wrapped, after which the refund
// may or may not have been made (see Store).
func (r *Redis) Refund(ctx context.Context, rc Receipt) (bool, error) {
	_, ok, err := r.settle(ctx, rc, 0)
	return ok, err
}

// Settle lowers an admitted charge to the actual cost, once the work is done
// and its real price known, and returns the receipt of the lowered charge.
// Raising a charge is refused: admitting more than was checked would break
// the limit. Settling to 0 is a refund. Every part of the charge is
// lowered, each once. A receipt whose charge is gone reports false and
// changes nothing. The zero Receipt, or actual outside
// [0, rc.Cost()], returns an error matching ErrInvalid; any other error is
// Redis's, wrapped (see Store).
func (r *Redis) Settle(ctx context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	return r.settle(ctx, rc, actual)
}

func (r *Redis) settle(ctx context.Context, rc Receipt, actual int64) (Receipt, bool, error) {
	if err := checkSettle(rc, actual); err != nil {
		return Receipt{}, false, err
	}
	n := rc.parts()
	keys := make([]string, 0, 2*n)
	args := make([]any, 1, 1+4*n)
	args[0] = actual
	for k := range n {
		p := rc.part(k)
		ms := p.marks()
		keys = append(keys, r.key(p.identity))
		if len(ms) > 0 {
			keys = append(keys, r.countersKey(p.identity))
		}
		args = append(args, p.index, p.at, p.cost, len(ms))
		for _, m := range ms {
			args = append(args, m.name, m.start)
		}
	}
	found, err := r.runScript(ctx, settleFn, keys, args...).Int()
	switch {
	case err != nil:
		return Receipt{}, false, fmt.Errorf("quota: settle: %w", err)
	case found == 0:
		return Receipt{}, false, nil
	case actual == 0:
		return Receipt{}, true, nil
	}
	return rc.withCost(actual), true, nil
}

// PeriodUnits is what a durable copy holds of one period: its limit and
// start, and the units used in it.
type PeriodUnits struct {
	PeriodKey
	Units int64
}

// raisedLife is the TTL of counters RaisePeriods creates: past the longest
// period, a month. Those the charge script writes live to their period's
// end.
const raisedLife = 32 * 24 * time.Hour

// RaisePeriods raises identities' counters of calendar periods to at
// least the units a durable copy (a ledger) holds, and restores those
// missing; it never lowers one, and leaves a counter that has moved on to
// a later period. After Redis lost writes its copy kept (a failover to a
// lagging replica, a restart from an older snapshot), the counters come
// back up. It sends one script an identity, in one pipeline, and returns
// how many counters it raised; its errors are Redis's, wrapped.
func (r *Redis) RaisePeriods(ctx context.Context, periods map[string][]PeriodUnits) (int, error) {
	if len(periods) == 0 {
		return 0, nil
	}
	life := strconv.FormatInt(raisedLife.Milliseconds(), 10)
	type raise struct {
		keys []string
		args []any
	}
	raises := make([]raise, 0, len(periods))
	for identity, ps := range periods {
		packed := make([]byte, 0, 16*len(ps))
		args := make([]any, 2, 2+len(ps))
		for _, p := range ps {
			packed = binary.BigEndian.AppendUint64(packed, math.Float64bits(float64(p.Start.UnixMicro())))
			packed = binary.BigEndian.AppendUint64(packed, math.Float64bits(float64(p.Units)))
			args = append(args, p.Limit)
		}
		args[0], args[1] = string(packed), life
		raises = append(raises, raise{[]string{r.countersKey(identity)}, args})
	}
	// One pipeline of EVALSHA, as the charge sends: a pipeline does not
	// fall back on NOSCRIPT by itself, so a server without the script (one
	// restarted, or a cluster node new to it) gets it loaded and the
	// pipeline sent again. A raise is idempotent: to at least the totals.
	var cmds []*redis.Cmd
	for try := 0; ; try++ {
		pipe := r.client.Pipeline()
		cmds = cmds[:0]
		for _, rs := range raises {
			cmds = append(cmds, raiseScript.EvalSha(ctx, pipe, rs.keys, rs.args...))
		}
		_, err := pipe.Exec(ctx)
		if err == nil {
			break
		}
		if try > 0 || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return 0, fmt.Errorf("quota: raise: %w", err)
		}
		if err := raiseScript.Load(ctx, r.client).Err(); err != nil {
			return 0, fmt.Errorf("quota: raise: load the script: %w", err)
		}
	}
	raised := 0
	for _, c := range cmds {
		n, err := c.Int()
		if err != nil {
			return raised, fmt.Errorf("quota: raise: %w", err)
		}
		raised += n
	}
	return raised, nil
}

// Reset forgets every charge of identity, under every plan. Its only errors
// are Redis's, wrapped.
func (r *Redis) Reset(ctx context.Context, identity string) error {
	if err := r.client.Del(ctx, r.key(identity), r.countersKey(identity)).Err(); err != nil {
		return fmt.Errorf("quota: reset: %w", err)
	}
	return nil
}

// key returns the key of identity's log.
func (r *Redis) key(identity string) string { return redislayout.LogKey(r.prefix, identity) }

// countersKey returns the key of identity's calendar counters.
func (r *Redis) countersKey(identity string) string {
	return redislayout.CountersKey(r.prefix, identity)
}

// nowMicros is the injected clock's time, or -1 for the script to read
// Redis TIME.
func (r *Redis) nowMicros() int64 {
	if r.now == nil {
		return -1
	}
	return r.now().UnixMicro()
}

func boolNum(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
