// Package dataversion keeps the version of the loaded data known in
// process, read again on an interval off the request path, so a server
// keys its tile caches by the data it serves without asking per request,
// and a load shows without a restart.
package dataversion

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// DefaultEvery is how often a Watch reads the version by default: a load
// shows within it.
const DefaultEvery = 5 * time.Second

// Fixed is a version that never changes: the bundled dataset's.
type Fixed string

// Current returns v.
func (v Fixed) Current() string { return string(v) }

// Watch holds the version last read.
type Watch struct {
	v atomic.Pointer[string]
}

// minReadTime is the least time a read is given, whatever the interval.
const minReadTime = time.Second

// Start reads the version with read, then again every interval until ctx
// ends; a failed read keeps the version held, and is logged. Its only
// error is the first read's.
func Start(ctx context.Context, read func(context.Context) (string, error), every time.Duration, log *slog.Logger) (*Watch, error) {
	v, err := read(ctx)
	if err != nil {
		return nil, err
	}
	w := &Watch{}
	w.v.Store(&v)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A hung read does not stop the next for long; a slow one, on a
			// busy database, still has time to answer when the interval is
			// short (a read bounded by a 10 ms interval never answered on
			// a loaded machine, and the version stayed old).
			rctx, cancel := context.WithTimeout(ctx, max(every, minReadTime))
			v, err := read(rctx)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.WarnContext(ctx, "data version read failed; the tile caches stay keyed by the version held", "err", err)
				}
				continue
			}
			w.v.Store(&v)
		}
	}()
	return w, nil
}

// Current returns the version last read.
func (w *Watch) Current() string { return *w.v.Load() }
