package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tileapi/tileapi/quota"
)

// Options configures Check. The zero value checks a history recorded on the
// machine the store runs on, whose periods lose nothing in a fault.
type Options struct {
	// Skew bounds how far the store's clock (Redis TIME) may be from the
	// recorder's: the times of givebacks and faults, taken by the recorder,
	// are widened by it. Zero for a store on the recorder's machine, where
	// both read the same clock; a charge admitted outside its call by more
	// than Skew is reported (Report.ClockAnomalies).
	Skew time.Duration
	// PeriodLoss is how long before a fault the charges may be that a
	// durable copy of the periods (the usage ledger) had not yet written
	// when the fault took Redis's counters: their units are what a period
	// may be over its maximum after the fault (for the ledger, its flush
	// interval and the time a write takes). Zero: periods lose nothing.
	PeriodLoss time.Duration
	// Examples is how many violations of each kind the report details;
	// zero for 5.
	Examples int
}

// Kind is a kind of violation.
type Kind string

// The kinds of violation.
const (
	// OverWindow is an admitted charge whose sliding window, by the model,
	// then held more than its maximum.
	OverWindow Kind = "over-admission in a window"
	// OverPeriod is an admitted charge whose calendar period, by the
	// model, then held more than its maximum and what faults may have lost.
	OverPeriod Kind = "over-admission in a period"
	// Miscount is an admitted charge that reported less usage of a limit
	// than the model counts: a store that forgot charges.
	Miscount Kind = "usage reported below the model's"
	// Spurious is a denial of a cost that fitted every limit by the model.
	Spurious Kind = "spurious denial"
	// Clock is an admitted charge whose admit time lies outside its call.
	Clock Kind = "admit time outside its call"
)

// Violation is one failed check, with what the model counted.
type Violation struct {
	Kind   Kind
	Charge Charge
	// Limit is the limit checked (the zero Limit for Clock); Period the
	// period counted, for a period limit.
	Limit  quota.Limit
	Period quota.PeriodKey
	// Counted is the model's sum of the units in the window or period
	// with the charge: a lower bound (an upper bound, for Spurious).
	Counted int64
	// Bound is what Counted was held to: the limit's maximum, plus for a
	// period what faults may have lost.
	Bound int64
	// Reported is what the store reported as used (for Miscount).
	Reported int64
	// Tie says several charges of the identity were admitted at the same
	// microsecond, and every order of them breaks a limit.
	Tie bool
}

// String describes the violation in a line.
func (v Violation) String() string {
	c := v.Charge
	s := fmt.Sprintf("%s: charge %d (%s, %s, plan %s, cost %d, %s, at %s)", v.Kind, c.ID, c.Server, c.Identity, c.Plan.Name, c.Cost, c.Outcome, stamp(c))
	switch v.Kind {
	case Clock:
		return s + fmt.Sprintf(": called %s to %s", c.Sent.Format(stampLayout), c.Answered.Format(stampLayout))
	case Miscount:
		return s + fmt.Sprintf(": limit %s reported %d used, the model counts at least %d", v.Limit, v.Reported, v.Counted)
	case Spurious:
		return s + fmt.Sprintf(": limit %s would have held at most %d with it", v.Limit, v.Counted)
	}
	where := ""
	if v.Limit.Period != quota.Sliding {
		where = " of the period from " + v.Period.Start.UTC().Format(time.RFC3339)
	}
	tie := ""
	if v.Tie {
		tie = " (charges tied at this microsecond, in any order)"
	}
	return s + fmt.Sprintf(": limit %s%s held at least %d, more than %d%s", v.Limit, where, v.Counted, v.Bound, tie)
}

const stampLayout = "15:04:05.000000"

func stamp(c Charge) string {
	if c.Outcome == Made {
		return c.At.UTC().Format(stampLayout)
	}
	return c.Sent.UTC().Format(stampLayout) + " to " + c.Answered.UTC().Format(stampLayout)
}

// Report is what Check found.
type Report struct {
	Identities int
	// Charges counts the calls recorded: Admitted, Denied, Unknown, and
	// Failed (not made, without a decision: quota.ErrLate, a bad plan).
	Charges, Admitted, Denied, Unknown, Failed int
	// Givebacks counts the refunds and settlements, Given those made.
	Givebacks, Given int
	Faults           int
	// WindowChecks and PeriodChecks count the (admitted charge, limit)
	// pairs checked; DenialChecks the denials judged.
	WindowChecks, PeriodChecks, DenialChecks int
	// Violations counts OverWindow and OverPeriod, Miscounts Miscount,
	// SpuriousDenials Spurious and ClockAnomalies Clock.
	Violations, Miscounts, SpuriousDenials, ClockAnomalies int
	// SpuriousInPeriods counts the spurious denials a calendar period
	// decided (see Check).
	SpuriousInPeriods int
	// Examples are the first violations of each kind.
	Examples []Violation
	// Ties counts groups of charges of one identity admitted at the same
	// microsecond, and UncertainTies those of them that some order, not
	// every one, would break a limit with: neither is a violation.
	Ties, UncertainTies int
	// Overshoots counts period checks over the maximum but within what
	// faults may have lost, and OvershootUnits the most units over.
	Overshoots     int
	OvershootUnits int64
}

// OK reports whether the history passed the safety checks: no
// over-admission, no usage reported below the model's, and admit times
// within their calls (which the safety checks rely on). Spurious denials
// are reported apart.
func (r Report) OK() bool { return r.Violations == 0 && r.Miscounts == 0 && r.ClockAnomalies == 0 }

// String reports the counts in a few lines, then the examples.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d charges of %d identities (%d admitted, %d denied, %d unknown, %d failed), %d refunds and settlements (%d made), %d faults\n",
		r.Charges, r.Identities, r.Admitted, r.Denied, r.Unknown, r.Failed, r.Givebacks, r.Given, r.Faults)
	fmt.Fprintf(&b, "checked %d windows and %d periods of admitted charges, %d denials: %d over-admissions, %d miscounts, %d spurious denials (%d by a period), %d clock anomalies\n",
		r.WindowChecks, r.PeriodChecks, r.DenialChecks, r.Violations, r.Miscounts, r.SpuriousDenials, r.SpuriousInPeriods, r.ClockAnomalies)
	fmt.Fprintf(&b, "%d ties (%d uncertain); %d period checks over the maximum within what faults may lose (at most %d units over)",
		r.Ties, r.UncertainTies, r.Overshoots, r.OvershootUnits)
	for _, v := range r.Examples {
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

// Check checks h against the model of the sliding-window quota: every
// admitted charge kept, under whatever plan, and each decision measuring
// its own plan's limits over all of them. Times are microseconds of the
// store's clock; what the recorder timed is widened by opt.Skew.
//
// Safety (Violations, Miscounts) is judged on lower bounds, so that a
// violation reported is one that happened. Each identity's admitted charges
// are ordered by admit time; the window of a charge at t under a limit of
// window W and maximum M is (t-W, t], as the store counts it, and holds:
//
//   - the charges admitted before t in it, at what remained of their cost
//     by t: a refund or settlement lowers the window from the time it was
//     sent (it was made between sending and its answer, and may have come
//     before t), never before; one that failed on its way (Unknown) counts
//     as made; one that found no charge counts as not made;
//   - none admitted at or before the end of a fault of the identity that
//     began by t: the store lost them;
//   - of the charges admitted at t itself (ties, rare: Redis runs one
//     script at a time and its clock counts microseconds), only the charge
//     itself: the receipt's index, the store's order, is not readable. A
//     tie group is reported when every order of it breaks a limit, and
//     counted as uncertain when only some do;
//   - charges whose outcome is Unknown: none.
//
// The charge breaks the limit when that sum is over M, and its reported
// usage is a miscount when below the sum. A calendar period counts the same
// way from its start, across faults (its counters are restored from a
// durable copy), and may be over its maximum by the units admitted in
// opt.PeriodLoss before each fault of the identity that began before the
// charge (Overshoots; beyond, OverPeriod).
//
// Liveness (SpuriousDenials) is judged on upper bounds: a denial, made at
// some time between its call's sending and answer, is spurious when its
// cost fits in every limit at every such time: the window's charges at
// their cost but for givebacks answered before the call was sent, those
// lost only in a fault that ended before it, and every Unknown charge that
// may have been made in it. A period's counter restored or raised from a
// durable copy (internal/ledger) may count refunds that other servers had
// not yet written to it, for the rest of the period, so a period may deny
// what the model would not (SpuriousInPeriods); a deny cache denies what a
// refund through another server freed (quota.DenyCache). Neither is a
// violation.
func Check(h History, opt Options) Report {
	if opt.Examples <= 0 {
		opt.Examples = 5
	}
	c := newChecker(h, opt)
	c.checkClocks()
	c.checkAdmitted()
	c.checkDenials()
	return c.report
}

// checker holds the indexes Check builds.
type checker struct {
	h      History
	opt    Options
	skew   int64
	report Report
	shown  map[Kind]int

	identities map[string]*series
	periods    map[periodID]*series
	// refs are, by charge ID, the series an admitted charge is in (its
	// identity's and its periods') and its place there.
	refs    [][]ref
	unknown map[string][]int // IDs, by the time they were sent
}

type periodID struct {
	identity, limit string
	start           int64
}

type ref struct {
	s   *series
	pos int
}

type fault struct{ start, end int64 } // widened by the skew

// series is a sorted run of admitted charges (an identity's, or a
// period's) with two running views of their costs: as low as they may
// have been by the sweep's time (for safety), and as high (for liveness).
type series struct {
	at     []int64
	orig   []int64 // prefix sums of the costs as charged
	lb, ub fenwick
}

func newChecker(h History, opt Options) *checker {
	c := &checker{
		h: h, opt: opt, skew: opt.Skew.Microseconds(), shown: map[Kind]int{},
		identities: map[string]*series{}, periods: map[periodID]*series{},
		refs: make([][]ref, len(h.Charges)), unknown: map[string][]int{},
	}
	r := &c.report
	r.Charges, r.Givebacks, r.Faults = len(h.Charges), len(h.Givebacks), len(h.Faults)
	members := map[*series][]int{}
	for id := range h.Charges {
		ch := &h.Charges[id]
		switch ch.Outcome {
		case Made:
			r.Admitted++
			s := c.identities[ch.Identity]
			if s == nil {
				s = &series{}
				c.identities[ch.Identity] = s
			}
			members[s] = append(members[s], id)
			for _, p := range ch.Periods {
				key := periodID{ch.Identity, p.Limit, p.Start.UnixMicro()}
				ps := c.periods[key]
				if ps == nil {
					ps = &series{}
					c.periods[key] = ps
				}
				members[ps] = append(members[ps], id)
			}
		case Unknown:
			r.Unknown++
			c.unknown[ch.Identity] = append(c.unknown[ch.Identity], id)
		case NotMade:
			if ch.Used != nil {
				r.Denied++
			} else {
				r.Failed++
			}
		}
	}
	for s, ids := range members {
		slices.SortFunc(ids, func(a, b int) int {
			return cmp.Or(cmp.Compare(h.Charges[a].At.UnixMicro(), h.Charges[b].At.UnixMicro()), cmp.Compare(a, b))
		})
		costs := make([]int64, len(ids))
		s.at, s.orig = make([]int64, len(ids)), make([]int64, len(ids)+1)
		for i, id := range ids {
			ch := &h.Charges[id]
			s.at[i] = ch.At.UnixMicro()
			costs[i] = ch.Cost
			s.orig[i+1] = s.orig[i] + ch.Cost
			c.refs[id] = append(c.refs[id], ref{s, i})
		}
		s.lb, s.ub = newFenwick(costs), newFenwick(costs)
	}
	seen := map[string]bool{}
	for _, ch := range h.Charges {
		seen[ch.Identity] = true
	}
	r.Identities = len(seen)
	for _, g := range h.Givebacks {
		if g.Outcome == Made {
			r.Given++
		}
	}
	for _, u := range c.unknown {
		slices.SortFunc(u, func(a, b int) int { return h.Charges[a].Sent.Compare(h.Charges[b].Sent) })
	}
	return c
}

// faultsOf returns the faults that lost identity's state.
func (c *checker) faultsOf(identity string, uncertain bool) []fault {
	var fs []fault
	for _, f := range c.h.Faults {
		if (f.Identity == "" || f.Identity == identity) && (uncertain || !f.Uncertain) {
			fs = append(fs, fault{f.Start.UnixMicro() - c.skew, f.End.UnixMicro() + c.skew})
		}
	}
	return fs
}

func (c *checker) add(v Violation) {
	switch v.Kind {
	case OverWindow, OverPeriod:
		c.report.Violations++
	case Miscount:
		c.report.Miscounts++
	case Spurious:
		c.report.SpuriousDenials++
	case Clock:
		c.report.ClockAnomalies++
	}
	if c.shown[v.Kind] < c.opt.Examples {
		c.shown[v.Kind]++
		c.report.Examples = append(c.report.Examples, v)
	}
}

// checkClocks reports admitted charges whose admit time lies outside their
// call, widened by the skew: the safety checks place givebacks and faults
// by the recorder's clock, and would then not be sound.
func (c *checker) checkClocks() {
	for _, ch := range c.h.Charges {
		if ch.Outcome != Made || ch.Sent.IsZero() {
			continue
		}
		at := ch.At.UnixMicro()
		if at < ch.Sent.UnixMicro()-c.skew || at > ch.Answered.UnixMicro()+c.skew {
			c.add(Violation{Kind: Clock, Charge: ch})
		}
	}
}

// lowering is a giveback's effect on a charge, from a time on.
type lowering struct {
	at     int64
	charge int
	actual int64
}

// lowerings returns the givebacks of charges admitted, as they take
// effect from (with made, those made only, by their answers; else those
// that may have been made, by their sending), in time order.
func (c *checker) lowerings(made bool) []lowering {
	var ls []lowering
	for _, g := range c.h.Givebacks {
		if g.Charge < 0 || g.Charge >= len(c.refs) || c.refs[g.Charge] == nil {
			continue
		}
		switch {
		case made && g.Outcome == Made:
			ls = append(ls, lowering{g.Answered.UnixMicro() + c.skew, g.Charge, g.Actual})
		case !made && g.Outcome != NotMade:
			ls = append(ls, lowering{g.Sent.UnixMicro() - c.skew, g.Charge, g.Actual})
		}
	}
	slices.SortFunc(ls, func(a, b lowering) int { return cmp.Compare(a.at, b.at) })
	return ls
}

// lower applies l to one view (lb or ub) of every series its charge is in.
func (c *checker) lower(l lowering, view func(*series) fenwick) {
	for _, r := range c.refs[l.charge] {
		f := view(r.s)
		if cur := f.at(r.pos); l.actual < cur {
			f.add(r.pos, l.actual-cur)
		}
	}
}

// limitCheck is one limit of one charge of a tie group, as measured.
type limitCheck struct {
	limit  quota.Limit
	period quota.PeriodKey
	// alone counts the charges before the group and the charge; all counts
	// the whole group instead of the charge alone.
	alone, all, bound, slack int64
}

// checkAdmitted sweeps the admitted charges in admit time order.
func (c *checker) checkAdmitted() {
	var order []int
	for id, rs := range c.refs {
		if rs != nil {
			order = append(order, id)
		}
	}
	chs := c.h.Charges
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(chs[a].At.UnixMicro(), chs[b].At.UnixMicro()), cmp.Compare(chs[a].Identity, chs[b].Identity), cmp.Compare(a, b))
	})
	ls := c.lowerings(false)
	lb := func(s *series) fenwick { return s.lb }
	faults := map[string][]fault{}
	for len(order) > 0 {
		first := chs[order[0]]
		t := first.At.UnixMicro()
		n := 1
		for n < len(order) && chs[order[n]].At.UnixMicro() == t && chs[order[n]].Identity == first.Identity {
			n++
		}
		group := order[:n]
		order = order[n:]
		for len(ls) > 0 && ls[0].at <= t {
			c.lower(ls[0], lb)
			ls = ls[1:]
		}
		fs, ok := faults[first.Identity]
		if !ok {
			fs = c.faultsOf(first.Identity, true)
			faults[first.Identity] = fs
		}
		c.checkGroup(group, t, fs)
	}
}

// checkGroup checks the charges of one identity admitted at t.
func (c *checker) checkGroup(group []int, t int64, fs []fault) {
	// What the identity's store still held at t: nothing from before the
	// end of a fault that began by t.
	cut := int64(-1 << 62)
	for _, f := range fs {
		if f.start <= t {
			cut = max(cut, min(f.end, t))
		}
	}
	exceeded, broken := 0, false
	var first Charge
	for k, id := range group {
		ch := c.h.Charges[id]
		if k == 0 {
			first = ch
		}
		over := false
		for i, lc := range c.measure(ch, t, cut, fs) {
			if lc.limit.Period == quota.Sliding {
				c.report.WindowChecks++
			} else {
				c.report.PeriodChecks++
			}
			bound := lc.bound + lc.slack
			switch {
			case lc.alone > bound:
				kind := OverWindow
				if lc.limit.Period != quota.Sliding {
					kind = OverPeriod
				}
				c.add(Violation{Kind: kind, Charge: ch, Limit: lc.limit, Period: lc.period, Counted: lc.alone, Bound: bound})
				broken = true
			case lc.alone > lc.bound:
				c.report.Overshoots++
				c.report.OvershootUnits = max(c.report.OvershootUnits, lc.alone-lc.bound)
			}
			if len(ch.Used) == len(ch.Plan.Limits) && ch.Used[i] < lc.alone-lc.slack {
				c.add(Violation{Kind: Miscount, Charge: ch, Limit: lc.limit, Period: lc.period, Counted: lc.alone - lc.slack, Reported: ch.Used[i]})
			}
			if lc.all > bound && !over {
				over = true
				exceeded++
			}
		}
	}
	if len(group) == 1 {
		return
	}
	// Whichever of the group was admitted last saw all of it.
	c.report.Ties++
	switch {
	case broken:
	case exceeded == len(group):
		v := Violation{Kind: OverWindow, Charge: first, Tie: true}
		for _, lc := range c.measure(first, t, cut, fs) {
			if lc.all > lc.bound+lc.slack {
				v.Limit, v.Period, v.Counted, v.Bound = lc.limit, lc.period, lc.all, lc.bound+lc.slack
				if lc.limit.Period != quota.Sliding {
					v.Kind = OverPeriod
				}
				break
			}
		}
		c.add(v)
	case exceeded > 0:
		c.report.UncertainTies++
	}
}

// measure returns, for each limit of ch's plan in order, the lower bounds
// of what it held at t.
func (c *checker) measure(ch Charge, t, cut int64, fs []fault) []limitCheck {
	s := c.identities[ch.Identity]
	out := make([]limitCheck, 0, len(ch.Plan.Limits))
	for _, l := range ch.Plan.Limits {
		lc := limitCheck{limit: l, bound: l.Max}
		if l.Soft {
			lc.bound = math.MaxInt64 / 2 // a soft cap admits past its max: it bounds nothing, its count is still exact
		}
		ps := s
		lo := 0
		if l.Period == quota.Sliding {
			lo = s.after(max(t-l.Window.Microseconds(), cut))
		} else {
			i := slices.IndexFunc(ch.Periods, func(p quota.PeriodKey) bool { return p.Limit == l.Name })
			if i < 0 {
				continue // a hand-made history without its periods
			}
			lc.period = ch.Periods[i]
			ps = c.periods[periodID{ch.Identity, l.Name, lc.period.Start.UnixMicro()}]
			loss := c.opt.PeriodLoss.Microseconds()
			for _, f := range fs {
				if f.start <= t {
					lc.slack += ps.origIn(f.start-loss, min(f.end, t-1))
				}
			}
		}
		hi, end := ps.atOrAfter(t), ps.after(t)
		before := ps.lb.sum(lo, hi)
		lc.alone, lc.all = before+ch.Cost, before+ps.lb.sum(hi, end)
		if l.Period == quota.Sliding && cut >= t {
			lc.all = lc.alone // admitted in a fault: the rest of its tie may be lost
		}
		out = append(out, lc)
	}
	return out
}

// checkDenials judges each denial on upper bounds (see Check).
func (c *checker) checkDenials() {
	var ds []int
	for id, ch := range c.h.Charges {
		if ch.Outcome == NotMade && ch.Used != nil {
			ds = append(ds, id)
		}
	}
	chs := c.h.Charges
	slices.SortFunc(ds, func(a, b int) int { return chs[a].Sent.Compare(chs[b].Sent) })
	ls := c.lowerings(true)
	ub := func(s *series) fenwick { return s.ub }
	faults := map[string][]fault{}
	for _, id := range ds {
		d := &chs[id]
		from, to := d.Sent.UnixMicro()-c.skew, d.Answered.UnixMicro()+c.skew
		for len(ls) > 0 && ls[0].at < from {
			c.lower(ls[0], ub)
			ls = ls[1:]
		}
		fs, ok := faults[d.Identity]
		if !ok {
			fs = c.faultsOf(d.Identity, false)
			faults[d.Identity] = fs
		}
		c.report.DenialChecks++
		c.judgeDenial(d, from, to, fs)
	}
}

func (c *checker) judgeDenial(d *Charge, from, to int64, fs []fault) {
	// What a fault over before the call lost, the store no longer counts.
	cut := int64(-1 << 62)
	for _, f := range fs {
		if f.end < from {
			cut = max(cut, f.start)
		}
	}
	var tightest *Violation
	for _, l := range d.Plan.Limits {
		if l.Soft {
			continue // it refuses nothing: no denial is its
		}
		var s *series
		lo, since := 0, int64(0)
		if l.Period == quota.Sliding {
			s = c.identities[d.Identity]
			since = from - l.Window.Microseconds()
			if s != nil {
				lo = max(s.after(since), s.atOrAfter(cut))
			}
		} else {
			start := periodStart(l.Period, time.UnixMicro(from), d.Plan.Location)
			if !periodStart(l.Period, time.UnixMicro(to), d.Plan.Location).Equal(start) {
				return // across a period's end: not judged
			}
			since = start.UnixMicro()
			s = c.periods[periodID{d.Identity, l.Name, since}]
		}
		used := c.unknownIn(d.Identity, since, to)
		if s != nil {
			used += s.ub.sum(lo, s.after(to))
		}
		if used+d.Cost > l.Max {
			return
		}
		if tightest == nil || l.Max-used < tightest.Bound-tightest.Counted {
			tightest = &Violation{Kind: Spurious, Charge: *d, Limit: l, Counted: used + d.Cost, Bound: l.Max}
		}
	}
	if tightest != nil {
		if b := d.Binding; b < len(d.Plan.Limits) && d.Plan.Limits[b].Period != quota.Sliding {
			c.report.SpuriousInPeriods++
		}
		c.add(*tightest)
	}
}

// unknownIn is the cost of identity's Unknown charges that may have been
// made in (since, to].
func (c *checker) unknownIn(identity string, since, to int64) int64 {
	var sum int64
	for _, id := range c.unknown[identity] {
		u := &c.h.Charges[id]
		if u.Sent.UnixMicro()-c.skew > to {
			break
		}
		if u.MadeBy.IsZero() || u.MadeBy.UnixMicro()+c.skew > since {
			sum += u.Cost
		}
	}
	return sum
}

// after returns the index of the first charge admitted after t.
func (s *series) after(t int64) int {
	return sort.Search(len(s.at), func(i int) bool { return s.at[i] > t })
}

// atOrAfter returns the index of the first charge admitted at or after t.
func (s *series) atOrAfter(t int64) int {
	return sort.Search(len(s.at), func(i int) bool { return s.at[i] >= t })
}

// origIn is the cost as charged of the charges admitted in (from, to].
func (s *series) origIn(from, to int64) int64 {
	lo, hi := s.after(from), s.after(to)
	if hi < lo {
		return 0
	}
	return s.orig[hi] - s.orig[lo]
}

// periodStart is the start of the period of p that holds t, in loc (nil:
// UTC), as quota counts it.
func periodStart(p quota.Period, t time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	if p == quota.Month {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
}

// fenwick is a binary indexed tree of sums, with the values kept beside it.
type fenwick struct{ tree, vals []int64 }

func newFenwick(vals []int64) fenwick {
	f := fenwick{tree: make([]int64, len(vals)+1), vals: slices.Clone(vals)}
	for i, v := range vals {
		f.tree[i+1] += v
		if j := i + 1 + (i+1)&-(i+1); j <= len(vals) {
			f.tree[j] += f.tree[i+1]
		}
	}
	return f
}

func (f fenwick) at(i int) int64 { return f.vals[i] }

func (f fenwick) add(i int, d int64) {
	f.vals[i] += d
	for i++; i < len(f.tree); i += i & -i {
		f.tree[i] += d
	}
}

// prefix is the sum of the first n values.
func (f fenwick) prefix(n int) int64 {
	var s int64
	for ; n > 0; n -= n & -n {
		s += f.tree[n]
	}
	return s
}

// sum is the sum of the values in [lo, hi).
func (f fenwick) sum(lo, hi int) int64 {
	if hi <= lo {
		return 0
	}
	return f.prefix(hi) - f.prefix(lo)
}
