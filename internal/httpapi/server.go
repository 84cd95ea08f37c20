// Package httpapi is tileapi's HTTP interface: vector tiles and geofence
// queries, each request identified by its API key, priced and charged to
// its plan's quota before the work runs, and refunded if the work fails.
//
// Every route is declared in routes.go; errors become problem+json in one
// place (problem.go); meter.go identifies and prices a request and passes it
// through the quota gate of package quotahttp, which charges, refuses and
// refunds.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/paulmach/orb/maptile"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/billing"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/dataversion"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/tokens"
	usagehist "github.com/tileapi/tileapi/internal/usage"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/tiles"
)

// Quota is the quota store: quota.Redis or quota.Memory.
type Quota = quota.Store

// InFlight limits the requests of one caller in progress at once, a slot
// taken with each request's charge: inflight.Redis (with the quota in the
// same Redis: one script for both) or inflight.Memory (with the quota in
// process).
type InFlight interface {
	Hold(store inflight.Store, identity string, max int) *inflight.Held
	Renew(ctx context.Context, l inflight.Lease) (bool, error)
	// Lease is how long a lease lasts unless renewed; 0 for ever.
	Lease() time.Duration
}

// Geofence answers radius and containment queries: geofence.PostGIS or
// geofence.Memory.
type Geofence interface {
	Within(ctx context.Context, q geofence.WithinQuery) ([]geofence.Near, error)
	Contains(ctx context.Context, q geofence.ContainsQuery) ([]dataset.Fence, error)
}

// Tiles renders vector tiles: tiles.PostGIS or tiles.Memory.
type Tiles interface {
	Tile(ctx context.Context, l tiles.Layer, t maptile.Tile) ([]byte, error)
}

// TileCache holds rendered tiles: tilecache.Hot, tilecache.Redis or
// tilecache.Memory.
type TileCache interface {
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Set(ctx context.Context, key string, tile []byte) error
}

// DataVersion tells the version of the loaded data as it stands, with no
// I/O: a *dataversion.Watch, or a dataversion.Fixed.
type DataVersion interface {
	Current() string
}

// Keys finds presented API keys: a keys.Index.
type Keys interface {
	// Find answers from memory; keys.ErrNotIndexed when it cannot tell.
	Find(secret string) (keys.Key, error)
	// FindByID answers a key by its id from memory, as Find does (a
	// token's parent key).
	FindByID(id int64) (keys.Key, error)
	// Customer answers a key's customer by its id from memory; the index
	// holds the customer of every key it holds.
	Customer(id int64) (keys.Customer, bool)
	// Lookup asks the key store about a key Find did not know.
	Lookup(ctx context.Context, secret string) (keys.Key, error)
	// Refresh reads the store's changes, and RefreshIfOlder does unless a
	// refresh began within age.
	Refresh(ctx context.Context) error
	RefreshIfOlder(ctx context.Context, age time.Duration) error
}

// Billing reads the events of the usage an export selects, in a fixed
// order: usage and adjustment events, or one settled event per row
// (billing.Format.Settled).
type Billing interface {
	Events(ctx context.Context, q billing.Query, settled bool) ([]billing.Event, error)
}

var _ Billing = (*billing.Postgres)(nil)

// KeyAdmin manages API keys and customers: keys.Postgres or keys.Memory.
type KeyAdmin interface {
	CreateKind(ctx context.Context, kind keys.Kind, name, plan string, customerID int64) (keys.Key, string, error)
	List(ctx context.Context) ([]keys.Key, error)
	Get(ctx context.Context, id int64) (keys.Key, error)
	Revoke(ctx context.Context, id int64) (keys.Key, error)
	SetPlan(ctx context.Context, id int64, plan string) (keys.Key, error)
	SetOverrides(ctx context.Context, id int64, overrides []byte) (keys.Key, error)
	SetExpiry(ctx context.Context, id int64, at time.Time) (keys.Key, error)
	Reroll(ctx context.Context, id int64, overlap time.Duration) (keys.Key, string, error)
	SetRestrictions(ctx context.Context, id int64, restrictions []byte) (keys.Key, error)
	SetCustomer(ctx context.Context, id, customerID int64) (keys.Key, error)
	CreateCustomer(ctx context.Context, name, plan string) (keys.Customer, error)
	GetCustomer(ctx context.Context, id int64) (keys.Customer, error)
	ListCustomers(ctx context.Context) ([]keys.Customer, error)
	SetCustomerPlan(ctx context.Context, id int64, plan string) (keys.Customer, error)
	RenameCustomer(ctx context.Context, id int64, name string) (keys.Customer, error)
}

// Check is one readiness check: a name and a ping.
type Check struct {
	Name string
	Ping func(ctx context.Context) error
	// Optional marks a dependency the service still serves without (Redis
	// under fail-open): /readyz reports its failure but stays ready.
	Optional bool
	// Timeout bounds the ping (default a second): a dependency slower than
	// the service's own budget for it is not ready.
	Timeout time.Duration
}

// Config is what a Server needs. The zero values of the optional fields
// are the documented defaults.
type Config struct {
	Quota Quota
	// InFlight enforces each plan's MaxInFlight; nil enforces none.
	InFlight InFlight
	Geofence Geofence
	Tiles    Tiles
	// Layers are the tile layers served; nil for the bundled layers,
	// drawn by Tiles.
	Layers *tiles.Catalog
	// Sets are the geofence sets served; nil for the bundled sets,
	// answered by Geofence.
	Sets      *geofence.Sets
	TileCache TileCache
	Keys      Keys
	KeyAdmin  KeyAdmin
	Plans     plans.Set
	// Billing, if set, serves the export of the usage history to billing
	// systems (GET /admin/usage/export): a *billing.Postgres. Without it
	// the route is not found.
	Billing Billing
	// Ready lists what /readyz pings.
	Ready []Check
	// DataVersion keys the tile cache, so tiles of old data are never
	// served after a load: a *dataversion.Watch, or a dataversion.Fixed;
	// nil for one that never changes.
	DataVersion DataVersion

	// NoAnonymous refuses requests without a key (401) instead of charging
	// them to the anonymous plan by client IP.
	NoAnonymous bool
	// TrustedProxies are the CIDR prefixes whose X-Forwarded-For is
	// believed; from anyone else the TCP peer is the client.
	TrustedProxies []string
	// AnonymousIPv6Prefix is the prefix length by which IPv6 clients are
	// counted: the addresses of one /N share one anonymous budget, one
	// allowance of unknown keys and of failed admin authentications.
	// Default DefaultAnonymousIPv6Prefix (64); 32 to 128.
	AnonymousIPv6Prefix int
	// FailClosed answers 503 when the quota store fails; the default
	// (fail-open) serves the request unmetered.
	FailClosed bool
	// Shadow computes and reports every decision but never blocks.
	Shadow bool
	// QuotaTimeout bounds each call of the quota store and of the tile
	// cache (default 50ms).
	QuotaTimeout time.Duration
	// QuotaMaxWait, when positive, is the longest a request the quota
	// refuses waits server-side for its turn instead of a 429, holding its
	// connection and in-flight slot meanwhile (quotahttp.WithMaxWait);
	// 0 answers 429 at once.
	QuotaMaxWait time.Duration
	// KeyTimeout bounds a lookup in the key store of a key the index does
	// not know (default 1s).
	KeyTimeout time.Duration
	// UnknownKeys is how many unknown API keys one client network may
	// present in a minute; beyond that, keys it presents that the key index
	// does not know are answered 429 without a lookup, so a flood of
	// made-up keys cannot reach the key store. Keys in the index are never
	// refused. Default DefaultUnknownKeys; negative disables the guard.
	UnknownKeys int64
	// AllowedOrigins are the origins whose pages may call /v1 (CORS), "*"
	// for any; nil means any (keys, not origins, are the API's
	// credentials, as for other tile servers), an empty non-nil slice
	// none, and []string{CORSKeys} those that some key in the index lists
	// in its restrictions. /admin never answers CORS.
	AllowedOrigins []string
	// PublicURL is the scheme and host clients reach the service at, for
	// the URLs in TileJSON and the catalog. Without it, they name the
	// request's Host when it is loopback or one of PublicHosts, else the
	// address the connection reached (see baseURL).
	PublicURL string
	// PublicHosts are the hosts (a name or address, and an optional port:
	// without one, any port) whose requests' TileJSON may name them, when
	// PublicURL is empty. Loopback hosts need no entry.
	PublicHosts []string
	// DemoKey is prefilled in the demo page's key field (embedded mode).
	DemoKey string
	// AdminToken enables the admin API (/admin/) for requests bearing it;
	// empty disables it.
	AdminToken string
	// AdminOnPublic also serves the admin API on the public handler; by
	// default only AdminHandler serves it, and the public handler answers
	// /admin/ with 404.
	AdminOnPublic bool
	// TokenSecret signs and verifies short-lived tokens (POST /v1/tokens),
	// at least tokens.MinSecret bytes, shared by every server of a
	// deployment; empty disables tokens.
	TokenSecret string
	// Alerts claims the threshold alerts of keys' plans (plans.Plan.Alerts)
	// that charges cross; nil sends none.
	Alerts Alerts

	// Usage receives the usage history of every metered request, and
	// UsageReader reads it back for /v1/usage and /admin/usage; with
	// neither, both are a usage.Memory keeping DefaultUsageRetention.
	Usage       usagehist.Recorder
	UsageReader usagehist.Reader
	// Now is the clock of the usage history's hours (default time.Now).
	Now func() time.Time

	Logger *slog.Logger
	// Registry receives the metrics and is served at /metrics (default: a
	// new one).
	Registry *prometheus.Registry
}

// DefaultUsageRetention is how long the usage history keeps hours by
// default: in process (usage.Memory), then forgotten; in PostgreSQL, then
// rolled up to days.
const DefaultUsageRetention = 90 * 24 * time.Hour

// maxCacheWrites bounds the tile cache writes in flight, so a slow cache
// cannot pile up goroutines.
const maxCacheWrites = 64

// Server is the HTTP handler of tileapi.
type Server struct {
	cfg         Config
	quota       Quota            // cfg.Quota behind a deny cache, within the time budget
	denials     *quota.DenyCache // in front of cfg.Quota, shared by every use
	meter       *quotahttp.Gate  // the quota gate of every metered route, and of /v1/quota
	keyPlans    keyPlans         // each key's plan with its overrides and its customer's, once per version of the key and customer
	keyAccess   keyAccess        // each key's restrictions, once per version of the key
	corsKeys    *corsKeys        // the origins keys allow, for CORS in keys mode; nil in another mode
	tileCache   TileCache        // cfg.TileCache within the time budget
	cacheWrites chan struct{}    // a slot per tile cache write in flight
	gzipped     *gzipCache       // the gzip encodings of recent tiles, by ETag
	inFlight    InFlight         // cfg.InFlight within the time budget; nil for none
	log         *slog.Logger
	metrics     *metrics
	unknownKeys *unknownKeyGuard // nil when disabled
	adminGuard  *adminGuard      // nil when the admin API is disabled
	tokens      *tokens.Signer   // nil when tokens are disabled
	openAPI     []byte           // openapi.json naming this server's layers and sets
	publicHosts []publicHost     // cfg.PublicHosts, split
	proxies     []netip.Prefix   // cfg.TrustedProxies, parsed
	handler     http.Handler
	admin       http.Handler
}

// NewServer returns the handler of the public routes; AdminHandler serves
// the admin API and the details of readiness.
func NewServer(cfg Config) (*Server, error) {
	switch {
	case cfg.Quota == nil || (cfg.Geofence == nil && cfg.Sets == nil) || (cfg.Tiles == nil && cfg.Layers == nil) || cfg.TileCache == nil || cfg.Keys == nil:
		return nil, errors.New("httpapi: Quota, Geofence (or Sets), Tiles (or Layers), TileCache and Keys are required")
	}
	if cfg.Layers == nil {
		var err error
		if cfg.Layers, err = tiles.NewCatalog(tiles.Bundled(cfg.Tiles)...); err != nil {
			return nil, err
		}
	}
	if cfg.Sets == nil {
		var err error
		if cfg.Sets, err = geofence.NewSets(geofence.Bundled(cfg.Geofence)...); err != nil {
			return nil, err
		}
	}
	if _, ok := cfg.Plans.Lookup(plans.Anonymous); !ok && !cfg.NoAnonymous {
		return nil, errors.New("httpapi: no anonymous plan, and anonymous requests are allowed")
	}
	if err := checkIdentity(&cfg); err != nil {
		return nil, err
	}
	if cfg.QuotaTimeout <= 0 {
		cfg.QuotaTimeout = quotahttp.DefaultTimeout
	}
	if cfg.AllowedOrigins == nil {
		cfg.AllowedOrigins = []string{"*"}
	}
	if cfg.KeyTimeout <= 0 {
		cfg.KeyTimeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DataVersion == nil {
		cfg.DataVersion = dataversion.Fixed("")
	}
	switch {
	case cfg.Usage == nil && cfg.UsageReader == nil:
		m := usagehist.NewMemory(DefaultUsageRetention, 0, cfg.Now)
		cfg.Usage, cfg.UsageReader = m, m
	case cfg.Usage == nil || cfg.UsageReader == nil:
		return nil, errors.New("httpapi: Usage and UsageReader go together")
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	// Denials are remembered until their retry time: a client that keeps
	// hammering after its 429 costs Redis nothing. The gate and every
	// other use share the cache, so a refund drops its denials.
	denials := quota.NewDenyCache(cfg.Quota)
	s := &Server{
		cfg: cfg, log: cfg.Logger, metrics: m,
		quota:       budgetQuota{q: denials, timeout: cfg.QuotaTimeout},
		denials:     denials,
		tileCache:   budgetCache{c: cfg.TileCache, timeout: cfg.QuotaTimeout},
		cacheWrites: make(chan struct{}, maxCacheWrites),
		gzipped:     newGzipCache(gzipCacheBytes),
	}
	if s.openAPI, err = describeCatalog(cfg.Layers, cfg.Sets); err != nil {
		return nil, err
	}
	if s.publicHosts, err = parsePublicHosts(cfg.PublicHosts); err != nil {
		return nil, err
	}
	for _, p := range cfg.TrustedProxies { // checked by checkIdentity
		s.proxies = append(s.proxies, netip.MustParsePrefix(p))
	}
	s.meter = s.newGate(denials)
	owed := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tileapi_quota_owed",
		Help: "Refunds, charges of requests served unmetered, settlements and in-flight releases the quota gate owes Redis, retried in the background until made.",
	}, func() float64 { return float64(s.meter.Pending()) })
	if err := cfg.Registry.Register(owed); err != nil {
		return nil, fmt.Errorf("httpapi: metrics: %w", err)
	}
	if slices.Equal(cfg.AllowedOrigins, []string{CORSKeys}) {
		s.corsKeys = &corsKeys{}
	}
	// Each key's plan and restrictions are resolved when the index takes
	// the key in, off the request path.
	if index, ok := cfg.Keys.(interface{ OnChange(func(keys.Key)) }); ok {
		index.OnChange(func(k keys.Key) {
			_, _ = s.planOf(k)
			s.resolveAccess(k)
		})
	}
	if cfg.InFlight != nil {
		s.inFlight = budgetInFlight{InFlight: cfg.InFlight, timeout: cfg.QuotaTimeout}
	}
	if s.unknownKeys, err = newUnknownKeyGuard(cfg, s.quota, s.quotaStoreFailed); err != nil {
		return nil, err
	}
	if s.adminGuard, err = newAdminGuard(cfg.AdminToken); err != nil {
		return nil, err
	}
	if s.tokens, err = newSigner(cfg.TokenSecret); err != nil {
		return nil, err
	}
	s.handler, s.admin = s.routes(), s.adminRoutes()
	return s, nil
}

// quotaStoreFailed counts and logs a failure of the quota store outside a
// charge.
func (s *Server) quotaStoreFailed(ctx context.Context, err error) {
	s.metrics.redisErrors.Inc()
	s.log.WarnContext(ctx, "quota store failed", "err", err)
}

// ServeHTTP serves the public routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// AdminHandler serves the admin API (/admin/, with the admin token) and
// /readyz with each dependency's error: what only operators should see,
// for a listener of its own on a private address.
func (s *Server) AdminHandler() http.Handler { return s.admin }
