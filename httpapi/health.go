package httpapi

import (
	"context"
	_ "embed"
	"net/http"
	"time"
)

// handleHealthz serves GET /healthz: the process is alive.
func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz serves GET /readyz: every dependency (Redis, the database)
// answers within a second; 503 naming those that do not.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	checks := map[string]string{}
	status := http.StatusOK
	for _, c := range s.cfg.Ready {
		if err := c.Ping(ctx); err != nil {
			checks[c.Name] = err.Error()
			status = http.StatusServiceUnavailable
			continue
		}
		checks[c.Name] = "ok"
	}
	writeJSON(w, status, map[string]any{"ready": status == http.StatusOK, "checks": checks})
}

//go:embed openapi.json
var openAPI []byte

// handleOpenAPI serves GET /openapi.json: the OpenAPI 3.1 description of
// every route.
func handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
