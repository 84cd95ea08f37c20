// Package redisclock estimates how far Redis's clock is ahead of this
// process's, so that a script can be given its caller's deadline in
// Redis's time: the quota's charge script and the in-flight acquire both
// refuse to act after it.
package redisclock

import (
	"context"
	"sync"
	"time"
)

// Offset estimates how far Redis's clock is ahead of this process's, from
// below: each reply carries the time Redis decided at, which came before
// the reply arrived, so that time less the arrival time is at most the
// true offset, and the largest such sample is the closest. A deadline
// moved into Redis time by it is never later than the true one, so a
// script never acts after the caller gave up (but for a reply delayed
// after an act made in time). The estimate is taken afresh every minute,
// so it follows a clock stepped back. The zero Offset has no estimate.
type Offset struct {
	mu    sync.Mutex
	best  int64     // microseconds
	since time.Time // when best was first taken, zero for none
}

// Observe takes redisMicros, the time Redis decided at, of a reply that
// arrived now.
func (c *Offset) Observe(redisMicros int64) {
	now := time.Now()
	sample := redisMicros - now.UnixMicro()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() || now.Sub(c.since) > time.Minute {
		c.best, c.since = sample, now
		return
	}
	c.best = max(c.best, sample)
}

// Deadline is when, in Redis time (microseconds), a script must act for
// its reply to reach the caller before ctx's deadline: halfway there, the
// other half left for the trip back. 0 (none) without a deadline or
// before any reply.
func (c *Offset) Deadline(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	c.mu.Lock()
	off, known := c.best, !c.since.IsZero()
	c.mu.Unlock()
	if !known {
		return 0
	}
	left := time.Until(d).Microseconds()
	return max(d.UnixMicro()-left/2+off, 1)
}
