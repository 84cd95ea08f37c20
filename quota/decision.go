package quota

import (
	"fmt"
	"math"
	"time"
)

// limitUsage is what a store measures of one limit: the units used, the
// admit time of the oldest charge in the window and, when the cost does not
// fit, the time at which it will (both -1 when there is none), in
// microseconds since the Unix epoch.
type limitUsage struct{ used, oldest, freeAt int64 }

// decide builds a Decision from a store's measurements; both stores share it
// so they cannot differ in how they report.
//
// dup is, for an admitted charge, the number of charges admitted before it
// at the same microsecond (see memberOf), and -1 when nothing was admitted.
func decide(identity string, plan Plan, cost int64, allowed bool, now, dup int64, raw []limitUsage) Decision {
	d := Decision{Allowed: allowed, Cost: cost, Limits: make([]LimitState, len(plan.Limits))}
	var freeAt int64 = -1
	for i, l := range plan.Limits {
		d.Limits[i] = newLimitState(l, raw[i].used, raw[i].oldest, now)
		if raw[i].freeAt > freeAt {
			freeAt, d.Binding = raw[i].freeAt, i
		}
	}
	if !allowed {
		d.RetryAfter = micros(freeAt - now)
		return d
	}
	d.Binding = leastRemaining(d.Limits)
	if dup >= 0 {
		d.Receipt = Receipt{identity: identity, member: memberOf(now, dup, cost), at: now, cost: cost}
	}
	return d
}

func newLimitState(l Limit, used, oldest, now int64) LimitState {
	s := LimitState{Limit: l, Used: used, Remaining: max(l.Max-used, 0)}
	if oldest >= 0 {
		s.ResetAfter = micros(oldest + l.Window.Microseconds() - now)
	}
	return s
}

func leastRemaining(ls []LimitState) int {
	b := 0
	for i, s := range ls {
		if s.Remaining < ls[b].Remaining {
			b = i
		}
	}
	return b
}

func micros(us int64) time.Duration {
	if us < 0 {
		return 0
	}
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// memberOf returns the log entry of a charge, as charge.lua packs it: the
// admit time (microseconds, big-endian in 7 bytes), then the cost in as few
// bytes as hold it. A charge admitted after dup others at the same
// microsecond is 17 bytes: time, cost in 6 bytes, dup mod 2^32 in 4, so
// members are unique without randomness, and usually 8 bytes long.
func memberOf(at, dup, cost int64) string {
	var b [17]byte
	putUint(b[0:7], uint64(at))
	if dup > 0 {
		putUint(b[7:13], uint64(cost))
		putUint(b[13:17], uint64(dup)&(1<<32-1))
		return string(b[:])
	}
	size := 1
	for size < 6 && cost >= 1<<(8*size) {
		size++
	}
	putUint(b[7:7+size], uint64(cost))
	return string(b[:7+size])
}

// ParseLogEntry reads a member of a Redis store's log (see Redis.LogKey):
// the admit time in microseconds since the Unix epoch and the cost.
func ParseLogEntry(member string) (at, cost int64, err error) {
	switch n := len(member); {
	case n >= 8 && n <= 13:
		return int64(getUint(member[:7])), int64(getUint(member[7:])), nil
	case n == 17:
		return int64(getUint(member[:7])), int64(getUint(member[7:13])), nil
	}
	return 0, 0, fmt.Errorf("quota: log entry %q is %d bytes, not a packed entry", member, len(member))
}

func putUint(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func getUint(s string) uint64 {
	var v uint64
	for i := 0; i < len(s); i++ {
		v = v<<8 | uint64(s[i])
	}
	return v
}
