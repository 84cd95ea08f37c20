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
	// draft-ietf-httpapi-ratelimit-headers-10, one entry per limit.
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

// HeaderStatus says how a request was metered (a Status); the gate always
// writes it.
const HeaderStatus = "X-Quota-Status"

// HeaderSettledCost is what a request cost once settled (see Settle).
const HeaderSettledCost = "X-Quota-Settled-Cost"

// ExposedHeaders are the headers a gate may write, for a CORS
// Access-Control-Expose-Headers list: without it a page on another origin
// cannot read them.
var ExposedHeaders = []string{
	"RateLimit-Policy", "RateLimit",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Cost",
	HeaderStatus, HeaderSettledCost, "Retry-After",
}

// policyCache holds the RateLimit-Policy of each plan a gate has seen: it
// changes only with the plan, and building it is a good part of what the
// headers cost a request.
type policyCache struct {
	plans sync.Map                     // plan name → *cachedPolicy
	last  atomic.Pointer[cachedPolicy] // the one used last: most gates have one plan, or a few
}

// cachedPolicy is what the headers of a plan's decisions share: its
// RateLimit-Policy, and each limit's maximum as an X-RateLimit-Limit value.
type cachedPolicy struct {
	plan   string
	limits []quota.Limit
	policy []string   // the header's value, shared: cap 1, so an append copies
	maxes  [][]string // X-RateLimit-Limit, by limit, shared likewise
}

// policy returns the shared header values of d's limits, under plan.
func (c *policyCache) policy(plan string, d quota.Decision) *cachedPolicy {
	if p := c.last.Load(); p != nil && p.plan == plan && p.matches(d) {
		return p
	}
	if v, ok := c.plans.Load(plan); ok {
		if p := v.(*cachedPolicy); p.matches(d) {
			c.last.Store(p)
			return p
		}
	}
	p := newCachedPolicy(plan, d)
	c.plans.Store(plan, p)
	c.last.Store(p)
	return p
}

// matches reports whether p was built from d's limits.
func (p *cachedPolicy) matches(d quota.Decision) bool {
	return slices.EqualFunc(p.limits, d.Limits, func(l quota.Limit, s quota.LimitState) bool { return l == s.Limit })
}

func newCachedPolicy(plan string, d quota.Decision) *cachedPolicy {
	p := &cachedPolicy{
		plan:   plan,
		limits: make([]quota.Limit, len(d.Limits)),
		policy: []string{string(appendPolicy(nil, d))}[:1:1],
		maxes:  make([][]string, len(d.Limits)),
	}
	for i, s := range d.Limits {
		p.limits[i] = s.Limit
		p.maxes[i] = []string{strconv.FormatInt(s.Limit.Max, 10)}[:1:1]
	}
	return p
}

func appendPolicy(buf []byte, d quota.Decision) []byte {
	for i, l := range d.Limits {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		// Names are tokens (quota.Plan.Validate): quoting is adding quotes.
		buf = append(append(append(buf, '"'), l.Limit.Name...), '"')
		buf = strconv.AppendInt(append(buf, ";q="...), l.Limit.Max, 10)
		buf = strconv.AppendInt(append(buf, ";w="...), windowSeconds(l.Limit), 10)
	}
	return buf
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
			text = strconv.AppendInt(append(text, ";t="...), ceilSeconds(l.ResetAfter), 10)
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

// windowSeconds is the w of a limit's policy: its window, or for a
// calendar period its nominal length (a day, 30 days); RateLimit's t says
// when the period really ends.
func windowSeconds(l quota.Limit) int64 {
	switch l.Period {
	case quota.Day:
		return 24 * 60 * 60
	case quota.Month:
		return 30 * 24 * 60 * 60
	}
	return ceilSeconds(l.Window)
}

func ceilSeconds(d time.Duration) int64 { return ceilDiv(int64(d), int64(time.Second)) }

func formatSeconds(d time.Duration) string { return strconv.FormatInt(max(ceilSeconds(d), 1), 10) }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
