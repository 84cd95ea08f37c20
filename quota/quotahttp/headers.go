package quotahttp

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tileapi/tileapi/quota"
)

// Headers is a set of the header groups a gate writes.
type Headers uint8

const (
	// HeadersDraft are RateLimit-Policy and RateLimit of the IETF draft
	// draft-ietf-httpapi-ratelimit-headers-11, one entry per limit, in
	// quota units (see the package doc).
	HeadersDraft Headers = 1 << iota
	// HeadersX are X-RateLimit-Limit, -Remaining and -Reset of the binding
	// limit (the one that decided), and X-RateLimit-Cost.
	HeadersX
	// HeaderRetryAfter is Retry-After on a refusal, in whole seconds,
	// rounded up.
	HeaderRetryAfter

	// AllHeaders is the default: every group.
	AllHeaders = HeadersDraft | HeadersX | HeaderRetryAfter
)

// HeaderStatus says how a request was metered (a Status): the gate writes
// it on every response it has priced, refusals included.
const HeaderStatus = "X-Quota-Status"

// HeaderSettledCost is what a request cost once settled (see Settle).
const HeaderSettledCost = "X-Quota-Settled-Cost"

// ExposedHeaders returns the headers a gate may write, for a CORS
// Access-Control-Expose-Headers list: without it a page on another origin
// cannot read them. The slice is the caller's to extend.
func ExposedHeaders() []string {
	return []string{
		"RateLimit-Policy", "RateLimit",
		"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Cost",
		HeaderStatus, HeaderSettledCost, "Retry-After",
	}
}

// policyCache holds the RateLimit-Policy of each plan a gate has seen: it
// changes only with the plan and, for a calendar period, with the period
// (a month's w is that month's length), and building it is a good part of
// what the headers cost a request.
type policyCache struct {
	plans sync.Map                     // policyKey → *cachedPolicy
	last  atomic.Pointer[cachedPolicy] // the one used last: most gates have one plan, or a few
	// clock reads the time the period of a calendar limit is found at; nil
	// is time.Now. Tests set the store's.
	clock func() time.Time
}

// cachedPolicy is what the headers of a plan's decisions share: its
// RateLimit-Policy, each limit's w, and each limit's maximum as an
// X-RateLimit-Limit value.
type cachedPolicy struct {
	plan    string           // policyKey of its plan
	locs    []*time.Location // by limit: its plan's (a Shared plan's has its own)
	limits  []quota.Limit
	windows []int64    // w, by limit: the window, or the length of the period ends names
	ends    []int64    // by limit: the end of the period w measures, Unix seconds; 0 for a window
	policy  []string   // the header's value, shared: cap 1, so an append copies
	maxes   [][]string // X-RateLimit-Limit, by limit, shared likewise
}

// policy returns the shared header values of d's limits, under plan.
func (c *policyCache) policy(plan quota.Plan, d quota.Decision) *cachedPolicy {
	var now time.Time // read only for a plan with a calendar period
	key := policyKey(plan)
	current := func(p *cachedPolicy) bool {
		if p == nil || p.plan != key || !p.matches(d) {
			return false
		}
		for i, loc := range p.locs { // as many as d's limits (matches)
			if loc != limitLocation(plan, i) {
				return false
			}
		}
		return p.current(d, func() time.Time {
			if now.IsZero() {
				now = c.now()
			}
			return now
		})
	}
	if p := c.last.Load(); current(p) {
		return p
	}
	if v, ok := c.plans.Load(key); ok {
		if p := v.(*cachedPolicy); current(p) {
			c.last.Store(p)
			return p
		}
	}
	if now.IsZero() {
		now = c.now()
	}
	p := newCachedPolicy(plan, d, now)
	c.plans.Store(key, p)
	c.last.Store(p)
	return p
}

func (c *policyCache) now() time.Time {
	if c.clock == nil {
		return time.Now()
	}
	return c.clock()
}

// matches reports whether p was built from d's limits.
func (p *cachedPolicy) matches(d quota.Decision) bool {
	return slices.EqualFunc(p.limits, d.Limits, func(l quota.Limit, s quota.LimitState) bool { return l == s.Limit })
}

// current reports whether each calendar limit of d is in the period p
// measured: whether the end its t counts to, read on this clock, is
// nearer that period's end than half the period. Periods a clock apart
// from the store's still match: the next end is a day or more away.
func (p *cachedPolicy) current(d quota.Decision, now func() time.Time) bool {
	for i, end := range p.ends {
		if end == 0 {
			continue
		}
		at := now().Add(d.Limits[i].ResetAfter).Unix()
		if abs(at-end) > p.windows[i]/2 {
			return false
		}
	}
	return true
}

// policyKey names the policy of plan in the cache: its name, and its
// Shared plans' (two keys of one plan may share different customers'
// plans).
func policyKey(plan quota.Plan) string {
	if len(plan.Shared) == 0 {
		return plan.Name
	}
	key := plan.Name
	for _, s := range plan.Shared {
		key += "\x00" + s.Plan.Name
	}
	return key
}

// limitLocation returns the time zone of limit i of a decision under plan
// (its limits, then its Shared plans'): that of the plan it belongs to.
func limitLocation(plan quota.Plan, i int) *time.Location {
	if i < len(plan.Limits) {
		return plan.Location
	}
	i -= len(plan.Limits)
	for _, s := range plan.Shared {
		if i < len(s.Plan.Limits) {
			return s.Plan.Location
		}
		i -= len(s.Plan.Limits)
	}
	return nil
}

func newCachedPolicy(plan quota.Plan, d quota.Decision, now time.Time) *cachedPolicy {
	p := &cachedPolicy{
		plan:    policyKey(plan),
		locs:    make([]*time.Location, len(d.Limits)),
		limits:  make([]quota.Limit, len(d.Limits)),
		windows: make([]int64, len(d.Limits)),
		ends:    make([]int64, len(d.Limits)),
		maxes:   make([][]string, len(d.Limits)),
	}
	for i, s := range d.Limits {
		p.locs[i] = limitLocation(plan, i)
		loc := p.locs[i]
		if loc == nil {
			loc = time.UTC
		}
		p.limits[i] = s.Limit
		p.maxes[i] = []string{strconv.FormatInt(s.Limit.Max, 10)}[:1:1]
		if s.Limit.Period == quota.Sliding {
			p.windows[i] = ceilSeconds(s.Limit.Window)
			continue
		}
		start, end := periodEnding(s.Limit.Period, loc, now.Add(s.ResetAfter))
		p.windows[i], p.ends[i] = end.Unix()-start.Unix(), end.Unix()
	}
	p.policy = []string{string(p.appendPolicy(nil))}[:1:1]
	return p
}

func (p *cachedPolicy) appendPolicy(buf []byte) []byte {
	for i, l := range p.limits {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		// Names are tokens (quota.Plan.Validate): quoting is adding quotes.
		buf = append(append(append(buf, '"'), l.Name...), '"')
		buf = strconv.AppendInt(append(buf, ";q="...), l.Max, 10)
		buf = strconv.AppendInt(append(buf, ";w="...), p.windows[i], 10)
	}
	return buf
}

// periodEnding returns the period of p, in loc, whose end is nearest end:
// the end a limit's t counts to, as this clock reads it. A day is 23, 24
// or 25 hours long, a month 28 to 31 days (less or more an hour where the
// clocks change in it), as quota counts them: from midnight, or the first
// of the month, to the next.
func periodEnding(p quota.Period, loc *time.Location, end time.Time) (start, stop time.Time) {
	before, after := p.Bounds(end, loc) // the boundary at or before end, and the one after
	if end.Sub(before) < after.Sub(end) {
		prev, _ := p.Bounds(before.Add(-time.Nanosecond), loc)
		return prev, before
	}
	return before, after
}

// The headers in canonical form, set straight into the map: Header.Set
// would canonicalize them on every request.
var (
	keyPolicy    = http.CanonicalHeaderKey("RateLimit-Policy")
	keyState     = http.CanonicalHeaderKey("RateLimit")
	keyLimit     = http.CanonicalHeaderKey("X-RateLimit-Limit")
	keyRemaining = http.CanonicalHeaderKey("X-RateLimit-Remaining")
	keyReset     = http.CanonicalHeaderKey("X-RateLimit-Reset")
	keyCost      = http.CanonicalHeaderKey("X-RateLimit-Cost")
	keyStatus    = http.CanonicalHeaderKey(HeaderStatus)
)

// headerValues is where write keeps what it sets. The map's slices share
// vals, each a full slice of one, so an append copies; the values share
// text, into which they are written once and never again, so a string may
// stand on it without a copy (as strings.Builder's does on its bytes).
type headerValues struct {
	vals [4]string
	text [112]byte // two limits' worth; more spill to the heap
}

// write sets the headers of d; it is on the path of every request, so it
// builds them by hand rather than with fmt. vals, if not nil, is where the
// values are kept, and must not have been written before; nil allocates.
func (hs Headers) write(h http.Header, d quota.Decision, cp *cachedPolicy, vals *headerValues) {
	if len(d.Limits) == 0 {
		return
	}
	if vals == nil {
		vals = new(headerValues)
	}
	// Every value is written into one text, then cut: ends records where
	// each value ends.
	var ends [4]int
	text := vals.text[:0]
	if hs&HeadersDraft != 0 {
		for i, l := range d.Limits {
			if i > 0 {
				text = append(text, ", "...)
			}
			text = append(append(append(text, '"'), l.Limit.Name...), `";r=`...)
			text = strconv.AppendInt(text, l.Remaining, 10)
			text = strconv.AppendInt(append(text, ";t="...), effectiveWindow(l, cp.windows[i]), 10)
		}
	}
	ends[0] = len(text)
	if hs&HeadersX != 0 {
		b := d.BindingLimit()
		for i, v := range [3]int64{b.Remaining, ceilSeconds(b.ResetAfter), d.Cost} {
			text = strconv.AppendInt(text, v, 10)
			ends[i+1] = len(text)
		}
	}
	all := unsafe.String(unsafe.SliceData(text), len(text))
	set := func(i int, key, v string) {
		vals.vals[i] = v
		h[key] = vals.vals[i : i+1 : i+1]
	}
	if hs&HeadersDraft != 0 {
		h[keyPolicy] = cp.policy
		set(0, keyState, all[:ends[0]])
	}
	if hs&HeadersX != 0 {
		h[keyLimit] = cp.maxes[d.Binding]
		for i, key := range [3]string{keyRemaining, keyReset, keyCost} {
			set(i+1, key, all[ends[i]:ends[i+1]])
		}
	}
}

// effectiveWindow is the t of a limit's state, in seconds, w its policy's
// window: the time within which the caller can use no more than the units
// its r says are left (draft-11's effective window). That is the time
// until the oldest charge leaves the window, or the calendar period ends:
// nothing comes back before. A window with no charge in it frees nothing
// ever, and bounds use by its whole length, w. Never more than w.
func effectiveWindow(l quota.LimitState, w int64) int64 {
	if l.ResetAfter <= 0 {
		return w
	}
	return min(ceilSeconds(l.ResetAfter), w)
}

func ceilSeconds(d time.Duration) int64 { return ceilDiv(int64(d), int64(time.Second)) }

func formatSeconds(d time.Duration) string { return strconv.FormatInt(max(ceilSeconds(d), 1), 10) }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func abs(x int64) int64 { return max(x, -x) }
