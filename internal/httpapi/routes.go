package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-chi/cors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/web"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// maxBodyBytes caps request bodies: only the admin API and POST
// /v1/tokens take one, and a small one.
const maxBodyBytes = 64 << 10

// newRouter is a router with the middleware and the not-found and
// method-not-allowed answers of both listeners.
func (s *Server) newRouter() chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.RequestID)
	r.Use(s.clientIP())
	r.Use(s.logRequests)
	r.Use(middleware.Recoverer)
	r.Use(middleware.RequestSize(maxBodyBytes))
	r.Use(newCompressor().Handler)
	// HEAD is served, and metered, as the GET it stands for: the same work
	// makes its ETag and length.
	r.Use(middleware.GetHead)
	r.NotFound(handleNotFound)
	// A 405 says which methods the resource has (RFC 9110 section 15.5.6),
	// as chi's own answer does; chi hands a handler of our own no list.
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", strings.Join(allowedMethods(r, req.URL.Path), ", "))
		writeProblem(w, problemFor(errMethodNotAllowed))
	})
	return r
}

// allowedMethods returns the methods r routes path for: HEAD with GET
// (middleware.GetHead serves it).
func allowedMethods(r chi.Router, path string) []string {
	var ms []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if r.Match(chi.NewRouteContext(), m, path) {
			ms = append(ms, m)
			if m == http.MethodGet {
				ms = append(ms, http.MethodHead)
			}
		}
	}
	return ms
}

// routes declares every route of the public listener.
func (s *Server) routes() http.Handler {
	r := s.newRouter()

	// Never metered.
	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}))
	r.Get("/openapi.json", s.handleOpenAPI)
	page := web.Handler(s.cfg.DemoKey, http.HandlerFunc(handleNotFound)) // the demo page
	r.Method(http.MethodGet, "/", page)
	r.Method(http.MethodGet, "/assets/*", page)

	r.Route("/v1", func(r chi.Router) {
		// Map libraries on customers' own sites call the API: CORS, on
		// the public routes only, never on /admin.
		if len(s.cfg.AllowedOrigins) > 0 {
			r.Use(cors.Handler(s.corsOptions()))
		}
		r.Get("/geofence", s.handleSets)
		r.Get("/geofence/within", s.handleWithin(geofence.PlacesSet))
		r.Get("/geofence/contains", s.handleContains(geofence.BoundariesSet))
		r.Get("/geofence/{set}/within", s.handleWithin(""))
		r.Get("/geofence/{set}/contains", s.handleContains(""))
		r.Get("/tiles", s.handleCatalog)
		r.Get("/tiles/{layer}.json", s.handleTileJSON)
		r.Get("/tiles/{layer}/{z}/{x}/{y}.mvt", s.handleTile)
		r.Get("/tiles/{layer}/{z}/{x}/{y}.pbf", s.handleTile)
		r.Get("/quota", s.handleQuota) // usage; not charged
		r.Get("/usage", s.handleUsage) // usage history; not charged
		r.Post("/tokens", s.handleMintToken)
	})

	// The admin API only where asked: by default /admin/ is not found here.
	if s.cfg.AdminOnPublic {
		r.Route("/admin", s.adminAPI)
	}
	return r
}

// adminRoutes declares every route of the admin listener.
func (s *Server) adminRoutes() http.Handler {
	r := s.newRouter()
	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyzDetail)
	r.Route("/admin", s.adminAPI)
	return r
}

// adminAPI declares the routes of the admin API, behind the admin token.
func (s *Server) adminAPI(r chi.Router) {
	r.Use(s.requireAdmin)
	r.Post("/keys", s.handleCreateKey)
	r.Get("/keys", s.handleListKeys)
	r.Get("/keys/{id}", s.handleGetKey)
	r.Delete("/keys/{id}", s.handleRevokeKey)
	r.Put("/keys/{id}/plan", s.handleSetPlan)
	r.Put("/keys/{id}/overrides", s.handleSetOverrides)
	r.Delete("/keys/{id}/overrides", s.handleDeleteOverrides)
	r.Put("/keys/{id}/restrictions", s.handleSetRestrictions)
	r.Delete("/keys/{id}/restrictions", s.handleDeleteRestrictions)
	r.Get("/keys/{id}/usage", s.handleKeyUsage)
	r.Delete("/keys/{id}/usage", s.handleResetUsage)
	r.Put("/keys/{id}/expiry", s.handleSetExpiry)
	r.Post("/keys/{id}/reroll", s.handleReroll)
	r.Put("/keys/{id}/customer", s.handleSetCustomer)
	r.Post("/customers", s.handleCreateCustomer)
	r.Get("/customers", s.handleListCustomers)
	r.Get("/customers/{id}", s.handleGetCustomer)
	r.Put("/customers/{id}/plan", s.handleSetCustomerPlan)
	r.Put("/customers/{id}/name", s.handleRenameCustomer)
	r.Get("/usage", s.handleAdminUsage)
	if s.cfg.Billing != nil {
		r.Get("/usage/export", s.handleUsageExport)
	}
}

// handleNotFound answers a route neither listener has.
func handleNotFound(w http.ResponseWriter, _ *http.Request) {
	writeProblem(w, problemFor(errRouteNotFound))
}

// corsOptions lets pages of the allowed origins (any, "*"; or, in keys
// mode, those some key allows) call the API with a key, and read the quota
// headers a map client needs to pace itself.
func (s *Server) corsOptions() cors.Options {
	o := cors.Options{
		AllowedOrigins: s.cfg.AllowedOrigins,
		AllowedMethods: []string{http.MethodGet, http.MethodHead},
		AllowedHeaders: []string{"X-API-Key", "Authorization", "If-None-Match"},
		ExposedHeaders: append(quotahttp.ExposedHeaders(), "ETag", "X-Tile-Cache"),
		MaxAge:         600, // seconds a browser may cache a preflight
	}
	if s.corsKeys != nil {
		o.AllowedOrigins = nil
		o.AllowOriginFunc = func(_ *http.Request, origin string) bool { return s.corsKeys.allows(origin) }
	}
	return o
}
