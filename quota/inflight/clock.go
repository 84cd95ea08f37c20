package inflight

import (
	"context"
	"sync"
	"time"
)

// deadline is when, in Redis time (microseconds, by the offset of Redis's
// clock seen so far), an acquire must take its slot for the reply to reach
// the caller before ctx's deadline: halfway there, the other half left for
// the trip back. 0 (none) without a deadline or before any reply. The
// quota's charge script takes its deadline the same way.
func (c *clockOffset) deadline(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	off, ok := c.get()
	if !ok {
		return 0
	}
	left := time.Until(d).Microseconds()
	return max(d.UnixMicro()-left/2+off, 1)
}

// clockOffset estimates how far Redis's clock is ahead of this process's,
// from below: each reply carries the time Redis took its decision at, which
// came before the reply arrived, so that time less the arrival time is at
// most the true offset, and the largest such sample is the closest. A
// deadline moved into Redis time by it is never later than the true one.
// The estimate is taken afresh every minute, so it follows a clock stepped
// back.
type clockOffset struct {
	mu    sync.Mutex
	best  int64     // microseconds
	since time.Time // when best was first taken, zero for none
}

// observe takes redisMicros, the time Redis decided at, of a reply that
// arrived now.
func (c *clockOffset) observe(redisMicros int64) {
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

func (c *clockOffset) get() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.best, !c.since.IsZero()
}
