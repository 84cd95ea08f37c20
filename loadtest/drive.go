package loadtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// drive runs workers goroutines that each call next until d has passed,
// maxRequests have been started, or ctx is done, and returns every result.
// Requests in flight at the end complete: cancelling them would make the
// server refund charges the client never saw answered. A bar labelled label
// shows progress on w, if w is not nil.
func drive(ctx context.Context, workers int, d time.Duration, maxRequests int, seed uint64, w io.Writer, label string,
	next func(ctx context.Context, worker int, r *rand.Rand) Result) []Result {
	var started atomic.Int64
	deadline := time.Now().Add(d)
	stopBar := showProgress(w, label, d, &started)
	defer stopBar()
	out := make([][]Result, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			for ctx.Err() == nil && time.Now().Before(deadline) && started.Add(1) <= int64(maxRequests) {
				out[i] = append(out[i], next(context.WithoutCancel(ctx), i, r))
			}
		}()
	}
	wg.Wait()
	var all []Result
	for _, rs := range out {
		all = append(all, rs...)
	}
	return all
}

// showProgress draws a bar of elapsed time, labelled with the requests
// started so far, until the returned func is called.
func showProgress(w io.Writer, label string, d time.Duration, n *atomic.Int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	bar := progressbar.NewOptions64(d.Milliseconds(),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				bar.Describe(fmt.Sprintf("%-24s %7d requests", label, n.Load()))
				_ = bar.Set64(min(time.Since(start).Milliseconds(), d.Milliseconds()))
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		_ = bar.Finish()
		fmt.Fprintf(w, "%s: %d requests in %v\n", label, n.Load(), time.Since(start).Round(time.Millisecond))
	}
}
