package httpapi

import (
	"context"
	"time"
)

// maxRetries bounds the calls of the store retried in the background at
// once (a cached tile's charge lowered, an in-flight slot given back), so a
// dead store cannot pile up goroutines.
const maxRetries = 1024

// retryLater makes try in the background, at once and then after 100 ms,
// 200 ms, 400 ms, ... until it succeeds or the next try would start after
// until. Each failure is counted and logged as the store's; gaveUp, if not
// nil, is told when the last one fails. It reports false, having tried
// nothing, when maxRetries calls are being retried already. try runs even
// after the request's client has gone.
func (s *Server) retryLater(ctx context.Context, until time.Time, try func(context.Context) error, gaveUp func()) bool {
	select {
	case s.retries <- struct{}{}:
	default:
		return false
	}
	go func() {
		defer func() { <-s.retries }()
		ctx := context.WithoutCancel(ctx)
		for wait := 100 * time.Millisecond; ; wait *= 2 {
			err := try(ctx)
			if err == nil {
				return
			}
			s.quotaStoreFailed(ctx, err)
			if time.Now().Add(wait).After(until) {
				if gaveUp != nil {
					gaveUp()
				}
				return
			}
			time.Sleep(wait)
		}
	}()
	return true
}
