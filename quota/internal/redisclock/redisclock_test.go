package redisclock

import (
	"context"
	"testing"
	"time"
)

// The deadline in Redis time is the caller's, moved by the largest offset
// seen, less half of what is left for the reply's way back; none before a
// reply or without a deadline.
func TestDeadline(t *testing.T) {
	var c Offset
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d := c.Deadline(ctx); d != 0 {
		t.Errorf("before any reply: %d, want 0", d)
	}
	ahead := (10 * time.Second).Microseconds()
	c.Observe(time.Now().UnixMicro() + ahead - 1000) // a sample a millisecond below the truth
	c.Observe(time.Now().UnixMicro() + ahead)
	c.Observe(time.Now().UnixMicro() + ahead - 5000) // smaller samples do not lower the estimate
	if d := c.Deadline(context.Background()); d != 0 {
		t.Errorf("without a deadline: %d, want 0", d)
	}
	end, _ := ctx.Deadline()
	// Half of what is left goes to the way back: what is left is read
	// between before and after.
	before := time.Until(end).Microseconds()
	got := c.Deadline(ctx)
	after := time.Until(end).Microseconds()
	// A sample is taken a moment after Redis's time it carries: the
	// estimate may fall short of ahead by that moment, at most the
	// millisecond below which a sample was smaller anyway.
	lo, hi := end.UnixMicro()+ahead-before/2-1000, end.UnixMicro()+ahead-after/2+1
	if got < lo || got > hi {
		t.Errorf("deadline %d, want within [%d, %d]", got, lo, hi)
	}
}
