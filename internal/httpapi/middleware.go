package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

type logKeyCtx struct{}

// logNote carries what the handler learns for the access log.
type logNote struct{ keyPrefix string }

// setLogKey records the key prefix (never the key) for the access log.
func setLogKey(ctx context.Context, prefix string) {
	if n, ok := ctx.Value(logKeyCtx{}).(*logNote); ok {
		n.keyPrefix = prefix
	}
}

// logRequests writes one JSON log line per request and counts it by route
// pattern and status.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		note := &logNote{}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), logKeyCtx{}, note)))
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		s.metrics.requestDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		s.log.LogAttrs(r.Context(), level, "request",
			slog.String("request_id", middleware.GetReqID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("key", note.keyPrefix),
			slog.String("quota", ww.Header().Get(headerStatus)),
			slog.String("cost", ww.Header().Get("X-RateLimit-Cost")),
		)
	})
}
