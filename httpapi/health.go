package httpapi

import (
	"context"
	_ "embed"
	"net/http"
	"sync"
	"time"
)

// readyTimeout bounds each readiness check on its own, so a hung
// dependency is reported as itself and cannot use up another's time.
const readyTimeout = time.Second

// handleHealthz serves GET /healthz: the process is alive.
func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz serves GET /readyz: each dependency (Redis, the database) is
// pinged at once, each within its own second. It answers 503 when a
// dependency the service cannot serve without fails; an optional one
// (Redis under fail-open) is reported as failing while the service stays
// ready, since it still serves.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	results := make([]string, len(s.cfg.Ready))
	var wg sync.WaitGroup
	for i, c := range s.cfg.Ready {
		wg.Go(func() {
			timeout := c.Timeout
			if timeout <= 0 {
				timeout = readyTimeout
			}
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			results[i] = "ok"
			if err := c.Ping(ctx); err != nil {
				results[i] = err.Error()
			}
		})
	}
	wg.Wait()
	checks := make(map[string]string, len(results))
	ready := true
	var degraded []string
	for i, c := range s.cfg.Ready {
		checks[c.Name] = results[i]
		switch {
		case results[i] == "ok":
		case c.Optional:
			degraded = append(degraded, c.Name)
		default:
			ready = false
		}
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	body := map[string]any{"ready": ready, "checks": checks}
	if len(degraded) > 0 {
		body["degraded"] = degraded
	}
	writeJSON(w, status, body)
}

//go:embed openapi.json
var openAPI []byte

// handleOpenAPI serves GET /openapi.json: the OpenAPI 3.1 description of
// every route.
func handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
