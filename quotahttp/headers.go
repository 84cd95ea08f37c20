package quotahttp

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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

// SetHeaders writes the quota headers of d in the groups of hs, as the gate
// does; for a service that answers a peek at usage itself.
func SetHeaders(h http.Header, d quota.Decision, hs Headers) { hs.write(h, d) }

func (hs Headers) write(h http.Header, d quota.Decision) {
	if len(d.Limits) == 0 {
		return
	}
	if hs&HeadersDraft != 0 {
		policies := make([]string, len(d.Limits))
		states := make([]string, len(d.Limits))
		for i, l := range d.Limits {
			policies[i] = fmt.Sprintf("%q;q=%d;w=%d", l.Limit.Name, l.Limit.Max, windowSeconds(l.Limit))
			states[i] = fmt.Sprintf("%q;r=%d;t=%d", l.Limit.Name, l.Remaining, ceilSeconds(l.ResetAfter))
		}
		h.Set("RateLimit-Policy", strings.Join(policies, ", "))
		h.Set("RateLimit", strings.Join(states, ", "))
	}
	if hs&HeadersX != 0 {
		b := d.BindingLimit()
		h.Set("X-RateLimit-Limit", strconv.FormatInt(b.Limit.Max, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(b.Remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(b.ResetAfter), 10))
		h.Set("X-RateLimit-Cost", strconv.FormatInt(d.Cost, 10))
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
