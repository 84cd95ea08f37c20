package httpapi

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/tiles"
)

// readyTimeout bounds each readiness check on its own, so a hung
// dependency is reported as itself and cannot use up another's time.
const readyTimeout = time.Second

// handleHealthz serves GET /healthz: the process is alive.
func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz serves GET /readyz on the public listener: ready (200) or
// not (503), and nothing more. A stranger learns no address, error or
// dependency name; the admin listener's /readyz has them.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	rd := s.readiness(r.Context())
	writeJSON(w, rd.status(), map[string]bool{"ready": rd.ready})
}

// handleReadyzDetail serves GET /readyz on the admin listener: whether the
// service is ready, each check's "ok" or error, and the optional
// dependencies that fail.
func (s *Server) handleReadyzDetail(w http.ResponseWriter, r *http.Request) {
	rd := s.readiness(r.Context())
	body := map[string]any{"ready": rd.ready, "checks": rd.checks}
	if len(rd.degraded) > 0 {
		body["degraded"] = rd.degraded
	}
	writeJSON(w, rd.status(), body)
}

// readiness is the outcome of every readiness check.
type readiness struct {
	ready    bool
	checks   map[string]string // "ok" or the error, by name
	degraded []string          // optional dependencies that fail
}

func (rd readiness) status() int {
	if rd.ready {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}

// readiness pings each dependency (Redis, the database) at once, each
// within its own time (a second unless the check says). The service is not
// ready when a dependency it cannot serve without fails; an optional one
// (Redis under fail-open) is reported as degraded while the service stays
// ready, since it still serves.
func (s *Server) readiness(ctx context.Context) readiness {
	results := make([]string, len(s.cfg.Ready))
	var wg sync.WaitGroup
	for i, c := range s.cfg.Ready {
		wg.Go(func() {
			timeout := c.Timeout
			if timeout <= 0 {
				timeout = readyTimeout
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			results[i] = "ok"
			if err := c.Ping(ctx); err != nil {
				results[i] = err.Error()
			}
		})
	}
	wg.Wait()
	rd := readiness{ready: true, checks: make(map[string]string, len(results))}
	for i, c := range s.cfg.Ready {
		rd.checks[c.Name] = results[i]
		switch {
		case results[i] == "ok":
		case c.Optional:
			rd.degraded = append(rd.degraded, c.Name)
		default:
			rd.ready = false
		}
	}
	return rd
}

//go:embed openapi.json
var openAPI []byte

// handleOpenAPI serves GET /openapi.json: the OpenAPI 3.1 description of
// every route, naming this server's layers and geofence sets.
func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.openAPI)
}

// describeCatalog returns openapi.json with the enums of layer and set
// names listing those of layers and sets: the document as this server
// answers it.
func describeCatalog(layers *tiles.Catalog, sets *geofence.Sets) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		return nil, fmt.Errorf("httpapi: openapi.json: %w", err)
	}
	var within, contains []string
	for _, set := range sets.All() {
		if set.Within {
			within = append(within, set.Name)
		}
		if set.Contains {
			contains = append(contains, set.Name)
		}
	}
	schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, enum := range map[string][]string{
		"Layer": layers.Names(), "Set": sets.Names(), "WithinSet": within, "ContainsSet": contains,
	} {
		schema, ok := schemas[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("httpapi: openapi.json has no schema %s", name)
		}
		if len(enum) == 0 {
			// No value is valid: an enum must list one, so say it with not.
			delete(schema, "enum")
			schema["not"] = map[string]any{}
			continue
		}
		schema["enum"] = enum
	}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return nil, fmt.Errorf("httpapi: openapi.json: %w", err)
	}
	return append(b, '\n'), nil
}
