// Package quota is an exact, cost-weighted sliding-window quota.
//
// A Plan is one or more Limits, each a window and a maximum number of cost
// units. Charging a cost to an identity admits it only if it fits in every
// limit of the plan over the trailing window ending now; an admitted charge is
// recorded in all of them, a denied one in none. There is no window boundary:
// for every limit and every trailing window of its length, the admitted costs
// sum to at most its maximum. A plan may share other identities' plans (a
// key's customer's): a charge must then fit those too, and is recorded in
// every identity or in none.
//
// Two stores implement it: Redis, which holds one limit exactly across any
// number of processes (one atomic Lua script a decision, on a single node or a
// Redis Cluster), and Memory, which holds it within one process.
package quota

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tileapi/tileapi/quota/internal/redislayout"
)

// MaxUnits bounds a limit's maximum and a charge's cost. Redis scripts count
// in Lua numbers (float64), which hold integers exactly up to 2^53; running
// sums stay far below that.
const MaxUnits = 1 << 40

// Limit is one sliding window of a plan.
type Limit struct {
	// Name identifies the limit to clients, for example "minute". It is a
	// token: letters, digits and "-_.".
	Name string
	// Max is the largest total cost admitted within any trailing Window.
	Max int64
	// Window is the length of the sliding window, a whole number of
	// milliseconds; zero for a Period limit.
	Window time.Duration
	// Period, when set, makes the limit count in calendar periods (a day,
	// a month) in the plan's Location instead of a sliding Window.
	Period Period
	// Soft, for a Period limit only, makes Max a soft cap: the limit
	// refuses nothing, and a charge that takes its count past Max is
	// admitted (if the plan's other limits admit it) and counted, the
	// units past Max being overage (Receipt.Overage). Used then exceeds
	// Max, and Remaining stays 0.
	Soft bool
}

// PerSecond returns a limit named "second" of max units per second.
func PerSecond(max int64) Limit { return Limit{Name: "second", Max: max, Window: time.Second} }

// PerMinute returns a limit named "minute" of max units per minute.
func PerMinute(max int64) Limit { return Limit{Name: "minute", Max: max, Window: time.Minute} }

// PerHour returns a limit named "hour" of max units per hour.
func PerHour(max int64) Limit { return Limit{Name: "hour", Max: max, Window: time.Hour} }

// String reads like prose: "300 per 1m0s (minute)", "100000 per month
// (month)", "100000 per month (month, soft)".
func (l Limit) String() string {
	if l.Soft {
		return fmt.Sprintf("%d per %s (%s, soft)", l.Max, l.Period, l.Name)
	}
	if l.Period != Sliding {
		return fmt.Sprintf("%d per %s (%s)", l.Max, l.Period, l.Name)
	}
	return fmt.Sprintf("%d per %s (%s)", l.Max, l.Window, l.Name)
}

// Plan is a named set of limits that every charge must fit in.
type Plan struct {
	Name   string
	Limits []Limit
	// Location is the time zone whose midnights and firsts of the month
	// bound the plan's Period limits; nil is UTC.
	Location *time.Location
	// History is how long an identity's log keeps each charge, when longer
	// than the plan's longest window; zero keeps the longest window. Give
	// every plan an identity may be charged under the longest window of
	// them all: a change of plan then measures the new plan's windows over
	// every charge still inside them, where a log kept only for the old
	// plan's windows would have forgotten some.
	History time.Duration
	// Shared lists identities whose plans every charge under this plan
	// must also fit, all or nothing, in the same atomic decision, and
	// which every admitted charge is recorded in too. On Redis Cluster
	// they must share the charged identity's hash slot: build them with
	// Member.
	Shared []Shared
}

// Shared is another identity whose plan a charge must also fit in: a
// customer's plan beside its key's own.
type Shared struct {
	Identity string
	Plan     Plan
}

// MaxShared is the most Shared identities a plan may have.
const MaxShared = 3

// Member returns the identity of member within group. In Redis its log
// and counters take group's hash tag, so the identities of one group (and
// group itself, as an identity) are charged together by one script on
// Redis Cluster. Member(g, m) is different from every plain identity and
// from Member of any other pair.
//
// It is "{" + group, escaped as in a Redis hash tag, + "}" + member, such
// as "{customer:7}key:42": an identity that starts with a brace-enclosed
// tag of letters, digits and "-_.:@%" is a member identity, whoever built
// it. group should be a plain identity, not empty: an empty tag pins no
// cluster slot, and a member identity's tag is not its own.
func Member(group, member string) string { return redislayout.Member(group, member) }

// NewPlan returns a validated plan, and Validate's error (matching
// ErrInvalid) if it cannot be enforced.
func NewPlan(name string, limits ...Limit) (Plan, error) {
	p := Plan{Name: name, Limits: limits}
	return p, p.Validate()
}

// Validate reports whether the plan can be enforced: at least one sliding
// window (the log that receipts name charges in), names that are unique
// tokens, maxima in [1, MaxUnits], windows of a whole number of
// milliseconds, at least one, and periods of a day or a month (without a
// window), the only limits that may be soft; and at most MaxShared Shared
// identities, each distinct and not empty, under a valid plan without
// Shared identities of its own, whose limits' names appear in no other
// plan of the charge (a decision names its limits by name). Its errors
// match ErrInvalid.
func (p Plan) Validate() error {
	if err := p.validateOwn(); err != nil {
		return err
	}
	if len(p.Shared) == 0 {
		return nil
	}
	if len(p.Shared) > MaxShared {
		return invalid("plan %q shares %d identities, more than %d", p.Name, len(p.Shared), MaxShared)
	}
	for k, s := range p.Shared {
		switch {
		case s.Identity == "":
			return invalid("plan %q: shared identity %d is empty", p.Name, k+1)
		case slices.ContainsFunc(p.Shared[:k], func(o Shared) bool { return o.Identity == s.Identity }):
			return invalid("plan %q: shared identity %q appears twice", p.Name, s.Identity)
		case len(s.Plan.Shared) > 0:
			return invalid("plan %q: the plan %q of shared identity %q shares identities of its own", p.Name, s.Plan.Name, s.Identity)
		}
		if err := s.Plan.validateOwn(); err != nil {
			return err
		}
		for _, l := range s.Plan.Limits {
			if other, ok := p.limitPlan(l.Name, k); ok {
				return &LimitError{Plan: s.Plan.Name, Limit: l.Name, Field: "name", Reason: fmt.Sprintf("appears in plan %q too", other)}
			}
		}
	}
	return nil
}

// limitPlan returns the name of the plan, of p's own and its first
// shared ones, that has a limit named name.
func (p Plan) limitPlan(name string, shared int) (string, bool) {
	named := func(l Limit) bool { return l.Name == name }
	if slices.ContainsFunc(p.Limits, named) {
		return p.Name, true
	}
	for _, s := range p.Shared[:shared] {
		if slices.ContainsFunc(s.Plan.Limits, named) {
			return s.Plan.Name, true
		}
	}
	return "", false
}

// validateOwn is Validate of the plan's own limits and history.
func (p Plan) validateOwn() error {
	if len(p.Limits) == 0 {
		return invalid("plan %q has no limits", p.Name)
	}
	if p.History < 0 || p.History%time.Millisecond != 0 {
		return invalid("plan %q: history %s is not a whole number of milliseconds", p.Name, p.History)
	}
	sliding := 0
	// Every charge validates its plan: with a few limits, looking for a
	// name twice by scanning is cheaper than a set.
	for i, l := range p.Limits {
		bad := func(field, format string, args ...any) error {
			return &LimitError{Plan: p.Name, Limit: l.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
		}
		if err := l.Period.valid(); err != nil {
			return bad("period", "%v", err)
		}
		switch {
		case !isToken(l.Name):
			return bad("name", "must be letters, digits, '-', '_' or '.', at most 64")
		case slices.ContainsFunc(p.Limits[:i], func(o Limit) bool { return o.Name == l.Name }):
			return bad("name", "appears twice")
		case l.Max < 1 || l.Max > MaxUnits:
			return bad("max", "%d is not in [1, %d]", l.Max, int64(MaxUnits))
		case l.Period != Sliding && l.Window != 0:
			return bad("window", "a %s limit has no window", l.Period)
		case l.Period == Sliding && (l.Window < time.Millisecond || l.Window%time.Millisecond != 0):
			return bad("window", "%s is not a whole number of milliseconds, at least one", l.Window)
		case l.Soft && l.Period == Sliding:
			return bad("soft", "a sliding window cannot be soft: only a day or month limit goes on past its max as overage")
		}
		if l.Period == Sliding {
			sliding++
		}
	}
	if sliding == 0 {
		return invalid("plan %q has no sliding window: a plan needs at least one beside its day and month limits", p.Name)
	}
	if len(p.Limits)-sliding > MaxPeriods {
		return invalid("plan %q has %d day and month limits, more than %d", p.Name, len(p.Limits)-sliding, MaxPeriods)
	}
	return nil
}

// split returns the indexes in p.Limits of its sliding windows and of its
// calendar periods.
func (p Plan) split() (sliding, periods []int) {
	for i, l := range p.Limits {
		if l.Period == Sliding {
			sliding = append(sliding, i)
		} else {
			periods = append(periods, i)
		}
	}
	return sliding, periods
}

// longestWindow is the plan's longest sliding window.
func (p Plan) longestWindow() time.Duration {
	var w time.Duration
	for _, l := range p.Limits {
		w = max(w, l.Window)
	}
	return w
}

// keep is how long an identity's log keeps a charge under p: its History
// or its longest window, whichever is longer.
func (p Plan) keep() time.Duration { return max(p.History, p.longestWindow()) }

// historyWindow reports whether p keeps charges longer than its windows:
// the stores then measure one more window, of p.History, which refuses
// nothing and marks where the records still kept start.
func (p Plan) historyWindow() bool { return p.History > p.longestWindow() }

// MaxCost is the largest cost the plan can ever admit: the smallest maximum
// of its limits and of its Shared plans' limits, leaving out soft ones,
// which refuse nothing. A costlier charge is refused with ErrTooCostly.
func (p Plan) MaxCost() int64 {
	m := int64(MaxUnits)
	for k := range p.parts() {
		for _, l := range p.partPlan(k).Limits {
			if !l.Soft {
				m = min(m, l.Max)
			}
		}
	}
	return m
}

// parts is the number of parts of a charge under p: the charged
// identity's, then one a Shared identity.
func (p Plan) parts() int { return 1 + len(p.Shared) }

// partPlan returns the plan of part k of a charge under p (see
// partIdentity): p's own limits for part 0, without its Shared
// identities, and for part k the plan of Shared identity k.
func (p Plan) partPlan(k int) Plan {
	if k == 0 {
		p.Shared = nil
		return p
	}
	return p.Shared[k-1].Plan
}

// partIdentity returns the identity of part k of a charge of identity
// under p: identity itself for part 0, Shared identity k for part k.
func (p Plan) partIdentity(identity string, k int) string {
	if k == 0 {
		return identity
	}
	return p.Shared[k-1].Identity
}

// limitCount is the number of limits of a decision under p: its own and
// its Shared plans'.
func (p Plan) limitCount() int {
	n := len(p.Limits)
	for _, s := range p.Shared {
		n += len(s.Plan.Limits)
	}
	return n
}

// checkCharge validates a charge before any I/O.
func checkCharge(identity string, p Plan, cost int64) error {
	if err := checkPeek(identity, p); err != nil {
		return err
	}
	if cost < 1 || cost > MaxUnits {
		return invalid("cost %d is not in [1, %d]", cost, int64(MaxUnits))
	}
	for k := range p.parts() {
		for _, l := range p.partPlan(k).Limits {
			if cost > l.Max && !l.Soft {
				return &TooCostlyError{Plan: p, Cost: cost, Limit: l}
			}
		}
	}
	return nil
}

// checkPeek validates a look at usage before any I/O.
func checkPeek(identity string, p Plan) error {
	if identity == "" {
		return invalid("the identity is empty")
	}
	if slices.ContainsFunc(p.Shared, func(s Shared) bool { return s.Identity == identity }) {
		return invalid("plan %q shares the charged identity %q", p.Name, identity)
	}
	return p.Validate()
}

// checkSettle validates a refund or settlement before any I/O.
func checkSettle(rc Receipt, actual int64) error {
	switch {
	case rc.IsZero():
		return invalid("settle: the receipt identifies no charge")
	case actual < 0 || actual > rc.cost:
		return invalid("settle: actual cost %d is not in [0, %d], the charged cost", actual, rc.cost)
	}
	return nil
}

// Decision is the outcome of a charge, or of a peek at usage.
type Decision struct {
	// Allowed reports whether the cost was admitted (and charged).
	Allowed bool
	// Cost is the cost asked for; zero for a peek.
	Cost int64
	// Limits holds the state of each limit of the plan, in plan order, then
	// of each limit of its Shared plans, in their order, after the
	// decision: an admitted cost is included in Used.
	Limits []LimitState
	// Binding is the index in Limits of the limit that decided: for a denial,
	// the violated limit that frees last; otherwise the one with the least
	// remaining of those that can refuse (not soft): the one that refuses
	// first.
	Binding int
	// RetryAfter is, for a denial, the earliest time after which the same
	// cost fits in every limit, absent other traffic: a retry then is
	// admitted, a retry one millisecond sooner is not.
	RetryAfter time.Duration
	// Receipt identifies an admitted charge, for Refund and Settle.
	Receipt Receipt
}

// LimitState is the usage of one limit.
type LimitState struct {
	Limit Limit
	// Used is the total cost admitted in the trailing window; above Max
	// for a soft limit in overage (or after an overdraft charge).
	Used int64
	// Remaining is Max - Used, never below zero.
	Remaining int64
	// ResetAfter is when the oldest charge in the window leaves it, freeing
	// capacity, zero when the window is empty; for a Period limit, when
	// the period ends and its count starts again at zero.
	ResetAfter time.Duration
}

// BindingLimit returns the state of the limit that decided.
func (d Decision) BindingLimit() LimitState { return d.Limits[d.Binding] }

// Given returns d as it stands once units of its charge are given back (a
// refund or settlement): they return to every limit, the Shared plans'
// too, and Cost is what remains charged. The receipt is unchanged.
func (d Decision) Given(units int64) Decision {
	d.Limits = slices.Clone(d.Limits)
	for i := range d.Limits {
		l := &d.Limits[i]
		l.Used = max(l.Used-units, 0)
		l.Remaining = max(l.Limit.Max-l.Used, 0) // still 0 for a limit left past its max
	}
	d.Cost -= units
	return d
}

// Receipt identifies one admitted charge. The zero Receipt identifies none.
// The receipt of a charge under a plan with Shared identities holds the
// receipts of its parts in them too (Shared): a refund or settlement
// gives back in every part.
type Receipt struct {
	identity string
	index    int64 // the charge's record, counted since the identity's log began
	at       int64 // admit time, microseconds since the Unix epoch
	cost     int64
	overage  int64 // the units of cost past a soft limit; the charged identity's receipt's only
	// periods are the calendar periods it was counted in, nil for none:
	// behind a pointer, so a Receipt stays small (it is copied with every
	// Decision) and comparable.
	periods *periodMarks
	// shared are the receipts of the charge's parts in its plan's Shared
	// identities, then zero ones; nil for none. Behind a pointer, as
	// periods are.
	shared *sharedReceipts
}

// sharedReceipts are the parts of a charge in Shared identities.
type sharedReceipts [MaxShared]Receipt

// Shared returns the receipts of the charge's parts in its plan's Shared
// identities, in order (each with its own Identity and Periods); nil for
// a plain charge.
func (r Receipt) Shared() []Receipt {
	if r.shared == nil {
		return nil
	}
	n := 0
	for n < len(r.shared) && !r.shared[n].IsZero() {
		n++
	}
	return slices.Clone(r.shared[:n])
}

// part returns the receipt of part k of the charge: r itself, without
// its shared parts, for part 0; Shared receipt k for part k.
func (r Receipt) part(k int) Receipt {
	if k == 0 {
		r.shared = nil
		return r
	}
	return r.shared[k-1]
}

// parts is the number of parts of the charge.
func (r Receipt) parts() int {
	n := 1
	for r.shared != nil && n <= MaxShared && !r.shared[n-1].IsZero() {
		n++
	}
	return n
}

// withCost returns the receipt of the charge once lowered to cost, in
// every part. The units given back are taken off its overage first: they
// are the last the charge counted.
func (r Receipt) withCost(cost int64) Receipt {
	r.overage = max(r.overage-(r.cost-cost), 0)
	r.cost = cost
	if r.shared != nil {
		sh := *r.shared
		for k := range sh {
			if !sh[k].IsZero() {
				sh[k].cost = cost
			}
		}
		r.shared = &sh
	}
	return r
}

// MaxPeriods is the most Period limits a plan may have.
const MaxPeriods = 4

// periodMark names the period of a period limit a charge was counted in.
type periodMark struct {
	name  string
	start int64 // microseconds since the Unix epoch
}

// periodMarks are the periods of a charge, in plan order, then empty.
type periodMarks [MaxPeriods]periodMark

// newPeriodMarks returns room for the marks of n periods: nil for none.
func newPeriodMarks(n int) *periodMarks {
	if n == 0 {
		return nil
	}
	return new(periodMarks)
}

// marks returns the periods the charge was counted in.
func (r Receipt) marks() []periodMark {
	if r.periods == nil {
		return nil
	}
	for i, m := range r.periods {
		if m.name == "" {
			return r.periods[:i]
		}
	}
	return r.periods[:]
}

// At returns when the charge was admitted, by the store's clock (Redis's
// TIME for a Redis store): the time its record is counted from.
func (r Receipt) At() time.Time { return time.UnixMicro(r.at) }

// Identity returns the identity the receipt's charge was made for.
func (r Receipt) Identity() string { return r.identity }

// Periods returns the calendar periods the receipt's charge was counted
// in, in plan order; none for a plan without Period limits.
func (r Receipt) Periods() []PeriodKey {
	ms := r.marks()
	if len(ms) == 0 {
		return nil
	}
	ks := make([]PeriodKey, len(ms))
	for i, m := range ms {
		ks[i] = PeriodKey{Limit: m.name, Start: time.UnixMicro(m.start)}
	}
	return ks
}

// Cost returns the units the receipt holds charged.
func (r Receipt) Cost() int64 { return r.cost }

// Overage returns how many of the units the receipt holds charged went
// past the Max of a soft limit (Limit.Soft): 0 for a charge within every
// limit. Where a charge went past several soft limits (a day's and a
// month's, its plan's and its Shared plan's) it is the most it went past
// any. A refund or settlement takes the units it gives back off the
// overage first: a receipt lowered by Settle holds the overage of what
// stays charged.
func (r Receipt) Overage() int64 { return r.overage }

// IsZero reports whether the receipt identifies no charge.
func (r Receipt) IsZero() bool { return r.identity == "" }

// ErrInvalid is matched (with errors.Is) by every validation error: a
// malformed plan, a cost out of range, a bad receipt.
var ErrInvalid = errors.New("quota: invalid")

// ErrLate reports a charge that reached Redis after the deadline of its
// context, and was therefore not made: a caller that gave up on it is
// never charged for it.
var ErrLate = errors.New("quota: the charge reached Redis after its deadline and was not made")

// ErrTooCostly is matched by a *TooCostlyError.
var ErrTooCostly = errors.New("quota: cost exceeds a limit's maximum")

// TooCostlyError reports a charge that no limit state could ever admit: its
// cost is above a limit's maximum. Nothing is recorded and there is no time
// worth retrying at.
type TooCostlyError struct {
	Plan  Plan
	Cost  int64
	Limit Limit
}

func (e *TooCostlyError) Error() string {
	return fmt.Sprintf("quota: cost %d exceeds limit %s", e.Cost, e.Limit)
}

// Is makes errors.Is(err, ErrTooCostly) true.
func (e *TooCostlyError) Is(target error) bool { return target == ErrTooCostly }

// LimitError reports what makes one limit of a plan invalid. It matches
// ErrInvalid.
type LimitError struct {
	Plan, Limit string
	// Field is what is wrong: "name", "max", "window", "period" or
	// "soft".
	Field  string
	Reason string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: plan %q: limit %q: %s %s", ErrInvalid, e.Plan, e.Limit, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *LimitError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func isToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0
}
