package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/alerts"
	"github.com/tileapi/tileapi/internal/billing"
	"github.com/tileapi/tileapi/internal/conncap"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/dataversion"
	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/seed"
	"github.com/tileapi/tileapi/internal/sources"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/internal/tokens"
	usagehist "github.com/tileapi/tileapi/internal/usage"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/redisbatch"
	"github.com/tileapi/tileapi/tiles"
)

// serveConfig is the configuration of `tileapi serve`: each flag defaults
// to an environment variable (see the README's configuration reference).
type serveConfig struct {
	// The listeners.
	addr, adminAddr, pprofAddr string
	maxConns                   int // open connections of the public listener
	adminToken                 string
	tokenSecret                string
	alertsURL                  string // the threshold alerts' webhook; empty: none
	alertsSecret               string // signs the alerts' deliveries
	adminOnPublic              bool

	// Who a request comes from, and where it is answered.
	trustedProxies, publicURL, corsOrigins string
	publicHosts                            string // hosts whose Host TileJSON may name, without publicURL
	anonymous                              bool   // requests without a key, charged by client network
	anonymousIPv6Prefix                    int
	unknownKeys                            int64 // unknown keys one client address may present a minute

	// The quota and its Redis.
	redisURL, redisPrefix            string
	requireRedis, allowEvictingRedis bool
	redisBatch                       bool
	plansFile                        string
	quotaFailure                     string // open or closed
	shadow                           bool
	quotaTimeout, quotaMaxWait       time.Duration
	inFlightLease                    time.Duration
	ledgerFlush                      time.Duration
	usage                            bool // the usage history recorded
	usageRetention                   time.Duration

	// The keys.
	demoKeys           string
	demoKeysInDatabase bool
	keyCacheTTL        time.Duration

	// PostGIS and the tiles.
	databaseURL       string
	layersFile        string // the operator's own layers and geofence sets
	discover          bool   // every table the database role may read, as a layer
	dbMaxConns        int
	queryTimeout      time.Duration
	tileCacheRedisURL string
	tileCacheTTL      time.Duration
	tileCacheHotMB    int           // MiB of hot tiles kept in process in front of Redis's cache
	dataVersionEvery  time.Duration // how often the data version is read again

	logLevel string

	// Parsed from the flags above.
	proxies, origins, hosts []string // trustedProxies, corsOrigins, publicHosts
	level                   slog.Level
}

func parseServe(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var err error // the first bad environment variable
	bad := func(name, envName, format string, v ...any) {
		if err == nil {
			err = fmt.Errorf("%s: "+format, append([]any{setting(name, envName)}, v...)...)
		}
	}
	// Every duration of serve must be positive, or not negative where 0
	// turns its feature off (checked after parsing).
	var durations []func() error
	duration := func(p *time.Duration, offAtZero bool, name, envName, def, usage string) {
		d, perr := time.ParseDuration(env(envName, def))
		if perr != nil {
			bad(name, envName, "%q is not a duration such as 50ms or 2s", getenv(envName))
		}
		fs.DurationVar(p, name, d, usage+" ($"+envName+")")
		durations = append(durations, func() error {
			switch {
			case offAtZero && *p < 0:
				return fmt.Errorf("%s: %s: want 0 (off) or a positive duration", setting(name, envName), *p)
			case !offAtZero && *p <= 0:
				return fmt.Errorf("%s: %s: want a positive duration", setting(name, envName), *p)
			}
			return nil
		})
	}
	dur := func(p *time.Duration, name, envName, def, usage string) {
		duration(p, false, name, envName, def, usage)
	}
	boolean := func(p *bool, name, envName string, def bool, usage string) {
		v := def
		if s := getenv(envName); s != "" {
			var ok bool
			if v, ok = parseBool(s); !ok {
				bad(name, envName, "%q is not 1, true, yes or 0, false, no", s)
			}
		}
		fs.BoolVar(p, name, v, usage+" ($"+envName+")")
	}
	integer := func(p *int, name, envName string, def int, usage string) {
		n := def
		if s := getenv(envName); s != "" {
			var perr error
			if n, perr = strconv.Atoi(s); perr != nil {
				bad(name, envName, "%q is not a whole number", s)
			}
		}
		fs.IntVar(p, name, n, usage+" ($"+envName+")")
	}
	fs.StringVar(&c.addr, "addr", env("TILEAPI_ADDR", ":8080"), "listen address ($TILEAPI_ADDR)")
	// Secrets, and URLs that may hold one, print redacted in usage.
	secretURLVar(fs, &c.redisURL, "redis-url", getenv("REDIS_URL"), "Redis `URL`; redis://host:port/db for one node, redis://host:port?addr=host2:port2&addr=... for a cluster, redis://sentinel1:26379?master_name=NAME&addr=sentinel2:26379&addr=... for a primary managed by Sentinel; empty: quotas in process ($REDIS_URL)")
	fs.StringVar(&c.redisPrefix, "redis-prefix", env("TILEAPI_REDIS_PREFIX", "tileapi:"), "what every key the service writes in Redis starts with (quotas PREFIXq:, in-flight slots PREFIXf:, tiles PREFIXtile:), so that deployments can share a Redis; no braces ($TILEAPI_REDIS_PREFIX)")
	secretURLVar(fs, &c.tileCacheRedisURL, "tile-cache-redis-url", getenv("TILEAPI_TILE_CACHE_REDIS_URL"), "Redis `URL` of the tile cache alone, which may evict (allkeys-lru suits it); empty: tiles are cached in REDIS_URL, or in process without it ($TILEAPI_TILE_CACHE_REDIS_URL)")
	secretURLVar(fs, &c.databaseURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL `URL` with PostGIS; empty: the bundled data in memory ($DATABASE_URL)")
	secretVar(fs, &c.adminToken, "admin-token", getenv("TILEAPI_ADMIN_TOKEN"), "bearer `token` of the /admin API; empty disables it ($TILEAPI_ADMIN_TOKEN)")
	secretVar(fs, &c.tokenSecret, "token-secret", getenv("TILEAPI_TOKEN_SECRET"), "`secret` that signs short-lived tokens (POST /v1/tokens), at least 32 bytes (openssl rand -hex 32 makes one), the same on every server; empty disables tokens ($TILEAPI_TOKEN_SECRET)")
	secretURLVar(fs, &c.alertsURL, "alerts-webhook-url", getenv("TILEAPI_ALERTS_WEBHOOK_URL"), "`URL` that threshold alerts (a plan's \"alerts\") are posted to, signed, retried for a day until it answers 2xx (docs/operations.md); needs DATABASE_URL; empty: no alerts ($TILEAPI_ALERTS_WEBHOOK_URL)")
	secretVar(fs, &c.alertsSecret, "alerts-webhook-secret", getenv("TILEAPI_ALERTS_WEBHOOK_SECRET"), "`secret` that signs the alerts' deliveries (Tileapi-Signature), at least 32 bytes, the same on every server ($TILEAPI_ALERTS_WEBHOOK_SECRET)")
	fs.StringVar(&c.adminAddr, "admin-addr", env("TILEAPI_ADMIN_ADDR", "127.0.0.1:8081"), "listen address of the admin API and of /readyz with each dependency's error; keep it private; none: no admin listener ($TILEAPI_ADMIN_ADDR)")
	boolean(&c.adminOnPublic, "admin-on-public", "TILEAPI_ADMIN_ON_PUBLIC", false, "also serve the admin API on the public listener")
	fs.StringVar(&c.plansFile, "plans-file", getenv("TILEAPI_PLANS_FILE"), "JSON file of plans replacing or adding to the defaults ($TILEAPI_PLANS_FILE)")
	fs.StringVar(&c.layersFile, "layers-file", getenv("TILEAPI_LAYERS_FILE"), "YAML or JSON `file` of your own tile layers (tables, functions, PMTiles archives, GeoJSON and FlatGeobuf files) and geofence sets, served beside the bundled ones; see tileapi layers ($TILEAPI_LAYERS_FILE)")
	secretVar(fs, &c.demoKeys, "demo-keys", getenv("TILEAPI_DEMO_KEYS"), "`key:plan,...` registered at start; default without a database: demo-free:free,demo-pro:pro ($TILEAPI_DEMO_KEYS)")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", getenv("TILEAPI_TRUSTED_PROXIES"), "comma-separated CIDRs whose X-Forwarded-For is believed ($TILEAPI_TRUSTED_PROXIES)")
	fs.StringVar(&c.corsOrigins, "cors-origins", env("TILEAPI_CORS_ORIGINS", "*"), "comma-separated origins whose pages may call /v1, * for any, keys for those some key's restrictions allow (docs/keys.md), none for no CORS ($TILEAPI_CORS_ORIGINS)")
	secretURLVar(fs, &c.publicURL, "public-url", getenv("TILEAPI_PUBLIC_URL"), "`scheme://host` clients use, for the URLs in TileJSON and the catalog; empty: the request's Host when it is loopback or in -public-hosts, else the address the connection reached ($TILEAPI_PUBLIC_URL)")
	fs.StringVar(&c.publicHosts, "public-hosts", getenv("TILEAPI_PUBLIC_HOSTS"), "comma-separated `hosts` (name or address, optional :port) whose requests' TileJSON names them, without -public-url; loopback hosts need no entry ($TILEAPI_PUBLIC_HOSTS)")
	fs.StringVar(&c.quotaFailure, "quota-failure", env("TILEAPI_QUOTA_FAILURE", "open"), "when Redis fails: open (serve unmetered) or closed (503) ($TILEAPI_QUOTA_FAILURE)")
	fs.StringVar(&c.pprofAddr, "pprof-addr", getenv("TILEAPI_PPROF_ADDR"), "address of a separate listener serving Go's profiles (/debug/pprof/); empty: none. Keep it on loopback ($TILEAPI_PPROF_ADDR)")
	fs.StringVar(&c.logLevel, "log-level", env("TILEAPI_LOG_LEVEL", "info"), "debug, info, warn or error ($TILEAPI_LOG_LEVEL)")
	boolean(&c.demoKeysInDatabase, "demo-keys-in-database", "TILEAPI_DEMO_KEYS_IN_DATABASE", false, "with a database, write the demo keys into it, where they stay until revoked; free-like plans only")
	boolean(&c.anonymous, "anonymous", "TILEAPI_ANONYMOUS", true, "serve requests without a key on the anonymous plan, by client IP")
	boolean(&c.shadow, "shadow", "TILEAPI_SHADOW", false, "report quota decisions but never block")
	boolean(&c.discover, "discover", "TILEAPI_DISCOVER", false, "also publish, as a layer, every table and view with a geometry column and a spatial index that the database role may read (tileapi layers -discover shows which)")
	boolean(&c.requireRedis, "require-redis", "TILEAPI_REQUIRE_REDIS", false, "refuse to start when REDIS_URL does not answer")
	boolean(&c.allowEvictingRedis, "allow-evicting-redis", "TILEAPI_ALLOW_EVICTING_REDIS", false, "start even though REDIS_URL's maxmemory-policy is not noeviction, and so may evict the quotas' keys")
	boolean(&c.redisBatch, "redis-batch", "TILEAPI_REDIS_BATCH", true, "send concurrent Redis calls together, one round trip a batch, and a tile's cache lookup with its charge where both are in REDIS_URL")
	integer(&c.anonymousIPv6Prefix, "anonymous-ipv6-prefix", "TILEAPI_ANONYMOUS_IPV6_PREFIX", httpapi.DefaultAnonymousIPv6Prefix, "prefix length, 32 to 128, by which anonymous IPv6 clients are counted: the addresses of one /N share one anonymous budget")
	integer(&c.maxConns, "max-conns", "TILEAPI_MAX_CONNS", 0, "most client connections open at once; at the cap a new one closes the longest-idle keep-alive, or waits; 0: the open-file limit less what Redis, the database and the process need")
	dur(&c.quotaTimeout, "quota-timeout", "TILEAPI_QUOTA_TIMEOUT", quotahttp.DefaultTimeout.String(), "time budget of one quota call")
	duration(&c.quotaMaxWait, true, "quota-max-wait", "TILEAPI_QUOTA_MAX_WAIT", "0s", "longest a request the quota refuses waits server-side for its turn instead of a 429 (a few hundred ms for map clients); 0: off")
	dur(&c.keyCacheTTL, "key-cache-ttl", "TILEAPI_KEY_CACHE_TTL", "5s", "how often the in-process key index reads the key store's changes: a revoked key stops working, and a plan change applies, within it")
	dur(&c.inFlightLease, "in-flight-lease", "TILEAPI_IN_FLIGHT_LEASE", "10s", "how long an in-flight slot lasts unless renewed: a dead server's slots come free within it")
	dur(&c.ledgerFlush, "ledger-flush", "TILEAPI_LEDGER_FLUSH", "1s", "how often each server writes its charges (with REDIS_URL and DATABASE_URL) and its usage history (with DATABASE_URL) to the usage ledger: a Redis that loses its counters loses at most this much of each server's")
	boolean(&c.usage, "usage", "TILEAPI_USAGE", true, "record the usage history (GET /v1/usage, /admin/usage, tileapi usage): off records none, and those answer only what was recorded before; the quota and its ledger are the same either way")
	dur(&c.usageRetention, "usage-retention", "TILEAPI_USAGE_RETENTION", "2160h", "how long the usage history keeps hours: in PostgreSQL, whole days past it are rolled up into days (kept); in process (no DATABASE_URL), hours past it are forgotten")
	dur(&c.tileCacheTTL, "tile-cache-ttl", "TILEAPI_TILE_CACHE_TTL", "1h", "how long a rendered tile is cached")
	integer(&c.tileCacheHotMB, "tile-cache-hot-mb", "TILEAPI_TILE_CACHE_HOT_MB", tilecache.DefaultHotBytes>>20, "MiB of the most asked-for tiles each server keeps in process in front of a tile cache in Redis, served and charged their hit price with no extra round trip; 0: off")
	dur(&c.dataVersionEvery, "data-version-refresh", "TILEAPI_DATA_VERSION_REFRESH", dataversion.DefaultEvery.String(), "how often the version of the loaded data is read from the database: tiles cached before a load stop being served within it")
	dur(&c.queryTimeout, "query-timeout", "TILEAPI_QUERY_TIMEOUT", "5s", "statement timeout of a spatial query, and the bound of a key lookup")
	fs.IntVar(&c.dbMaxConns, "db-max-conns", 10, "most database connections; keep it below the server's max_connections")
	unknown, perr := strconv.ParseInt(env("TILEAPI_UNKNOWN_KEYS", strconv.Itoa(httpapi.DefaultUnknownKeys)), 10, 64)
	if perr != nil {
		bad("unknown-keys", "TILEAPI_UNKNOWN_KEYS", "%q is not a whole number", getenv("TILEAPI_UNKNOWN_KEYS"))
	}
	fs.Int64Var(&c.unknownKeys, "unknown-keys", unknown, "unknown API keys one client address may present a minute before keys it sends are refused unlooked-up; -1: no limit ($TILEAPI_UNKNOWN_KEYS)")
	if err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		if msg := err.Error(); !errors.Is(err, flag.ErrHelp) && strings.ContainsAny(msg, "\r\n") {
			// A flag's name may hold a newline: the error stays one line.
			return c, errors.New(strconv.Quote(msg))
		}
		return c, err
	}
	if strings.ContainsAny(c.redisPrefix, "{}") {
		// A brace would move the keys' Redis Cluster hash slot.
		return c, fmt.Errorf("%s: %q: want no braces", setting("redis-prefix", "TILEAPI_REDIS_PREFIX"), c.redisPrefix)
	}
	if c.quotaFailure != "open" && c.quotaFailure != "closed" {
		return c, fmt.Errorf("%s: %q: want open or closed", setting("quota-failure", "TILEAPI_QUOTA_FAILURE"), c.quotaFailure)
	}
	if err := c.level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return c, fmt.Errorf("%s: %q: want debug, info, warn or error", setting("log-level", "TILEAPI_LOG_LEVEL"), c.logLevel)
	}
	if c.proxies, err = parsePrefixes(c.trustedProxies); err != nil {
		return c, fmt.Errorf("%s: %w", setting("trusted-proxies", "TILEAPI_TRUSTED_PROXIES"), err)
	}
	if c.origins, err = parseOrigins(c.corsOrigins); err != nil {
		return c, fmt.Errorf("%s: %w", setting("cors-origins", "TILEAPI_CORS_ORIGINS"), err)
	}
	c.hosts = splitList(c.publicHosts)
	for _, h := range c.hosts {
		if err := httpapi.CheckPublicHost(h); err != nil {
			return c, fmt.Errorf("%s: %w", setting("public-hosts", "TILEAPI_PUBLIC_HOSTS"), err)
		}
	}
	for _, check := range durations {
		if err := check(); err != nil {
			return c, err
		}
	}
	if c.anonymousIPv6Prefix < 32 || c.anonymousIPv6Prefix > 128 {
		return c, fmt.Errorf("%s: %d: want a prefix length from 32 to 128", setting("anonymous-ipv6-prefix", "TILEAPI_ANONYMOUS_IPV6_PREFIX"), c.anonymousIPv6Prefix)
	}
	if c.tileCacheHotMB < 0 {
		return c, fmt.Errorf("%s: %d: want 0 (off) or a positive number", setting("tile-cache-hot-mb", "TILEAPI_TILE_CACHE_HOT_MB"), c.tileCacheHotMB)
	}
	if c.maxConns < 0 {
		return c, fmt.Errorf("%s: %d: want a positive number, or 0 for one from the open-file limit", setting("max-conns", "TILEAPI_MAX_CONNS"), c.maxConns)
	}
	if c.dbMaxConns < 1 || c.dbMaxConns > math.MaxInt32 {
		return c, fmt.Errorf("-db-max-conns %d: want a positive number", c.dbMaxConns)
	}
	if n := utf8.RuneCountInString(c.adminToken); n > 0 && n < minAdminToken {
		return c, fmt.Errorf("TILEAPI_ADMIN_TOKEN: %d characters, want at least %d (openssl rand -hex 32 makes one), or empty to disable the admin API", n, minAdminToken)
	}
	if n := len(c.tokenSecret); n > 0 && n < tokens.MinSecret {
		return c, fmt.Errorf("TILEAPI_TOKEN_SECRET: %d bytes, want at least %d (openssl rand -hex 32 makes one), or empty to disable tokens", n, tokens.MinSecret)
	}
	if err := checkAlerts(c); err != nil {
		return c, err
	}
	if c.unknownKeys == 0 {
		return c, errors.New("-unknown-keys 0: want at least 1, or -1 for no limit")
	}
	return c, nil
}

// checkAlerts checks the webhook of threshold alerts: a URL of http or
// https, a secret long enough, and a database to claim them in.
func checkAlerts(c serveConfig) error {
	if c.alertsURL == "" {
		if c.alertsSecret != "" {
			return errors.New("TILEAPI_ALERTS_WEBHOOK_SECRET is set without TILEAPI_ALERTS_WEBHOOK_URL")
		}
		return nil
	}
	if err := alerts.CheckURL(c.alertsURL); err != nil {
		return fmt.Errorf("%s: %s: %w", setting("alerts-webhook-url", "TILEAPI_ALERTS_WEBHOOK_URL"), redact(c.alertsURL, true), err)
	}
	if n := len(c.alertsSecret); n < alerts.MinSecret {
		return fmt.Errorf("TILEAPI_ALERTS_WEBHOOK_SECRET: %d bytes, want at least %d (openssl rand -hex 32 makes one) to sign the alerts", n, alerts.MinSecret)
	}
	if c.databaseURL == "" {
		return errors.New("TILEAPI_ALERTS_WEBHOOK_URL needs DATABASE_URL: each alert is claimed once, across every server, in PostgreSQL")
	}
	return nil
}

// minAdminToken is the fewest characters an admin token may have.
const minAdminToken = 32

// runServe serves the API until ctx is done, then shuts down gracefully.
func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseServe(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: c.level}))
	// go-redis logs through a package-level logger: route it into ours, so
	// the log stays one JSON object a line.
	redis.SetLogger(redisLogger{log: log.With("component", "go-redis")})
	ps, err := loadPlans(c.plansFile)
	if err != nil {
		return err
	}
	if names := ps.NoInFlightLimit(); len(names) > 0 {
		log.Warn(noInFlightLimit, "plans", names)
	}
	demoSpec := c.demoKeys
	if demoSpec == "" && c.databaseURL == "" {
		demoSpec = embeddedDemoKeys
	}
	demo, err := parseDemoKeys(ps, demoSpec, c.databaseURL != "", c.demoKeysInDatabase)
	if err != nil {
		return err
	}

	cfg := httpapi.Config{
		Plans: ps, NoAnonymous: !c.anonymous, FailClosed: c.quotaFailure == "closed", Shadow: c.shadow,
		QuotaTimeout: c.quotaTimeout, QuotaMaxWait: c.quotaMaxWait, KeyTimeout: c.queryTimeout, AdminToken: c.adminToken, AdminOnPublic: c.adminOnPublic,
		TokenSecret: c.tokenSecret, PublicURL: c.publicURL, PublicHosts: c.hosts, Logger: log, UnknownKeys: c.unknownKeys,
		TrustedProxies: c.proxies, AllowedOrigins: c.origins, AnonymousIPv6Prefix: c.anonymousIPv6Prefix,
	}
	o := &opened{reserve: fdReserve}
	defer o.close()
	rdb, err := openQuota(ctx, c, &cfg, o, log)
	if err != nil {
		return err
	}
	if err := openTileCache(ctx, c, &cfg, o, log); err != nil {
		return err
	}
	store, err := openData(ctx, c, &cfg, rdb, o, log)
	if err != nil {
		return err
	}
	index, err := openKeys(ctx, c, &cfg, store, demo, stdout)
	if err != nil {
		return err
	}

	srv, err := httpapi.NewServer(cfg)
	if err != nil {
		return err
	}
	if c.publicURL == "" {
		log.Info("no TILEAPI_PUBLIC_URL: TileJSON's tile URLs name the request's Host when it is loopback or in TILEAPI_PUBLIC_HOSTS, "+
			"else the address the connection reached; behind a proxy, set TILEAPI_PUBLIC_URL", "public_hosts", c.hosts)
	}
	// Loaded once the server is told of each key it takes in.
	if err := index.Refresh(ctx); err != nil {
		return err
	}
	log.Info("key index loaded", "keys", index.Len())
	go index.Run(ctx, func(err error) { log.Warn("key index refresh failed; serving the keys it has", "err", err) })
	conns, err := connCap(c.maxConns, o.reserve)
	if err != nil {
		return err
	}
	if c.pprofAddr != "" {
		if err := servePprof(ctx, c.pprofAddr, log); err != nil {
			return err
		}
	}
	return serveListeners(ctx, c, srv, conns, log)
}

// opened is what serve has opened: closed last first when it returns, and
// the file descriptors the process needs besides its clients' (reserve).
type opened struct {
	closers []func()
	reserve int
}

func (o *opened) onClose(f func()) { o.closers = append(o.closers, f) }

func (o *opened) close() {
	for _, f := range slices.Backward(o.closers) {
		f()
	}
}

// keyStore is where the keys live: PostgreSQL, or memory.
type keyStore interface {
	httpapi.KeyAdmin
	Add(ctx context.Context, name, plan, secret string) (keys.Key, error)
	LookupEntry(ctx context.Context, hash []byte) (keys.Entry, error)
	Changed(ctx context.Context, since time.Time) ([]keys.Entry, error)
	ChangedCustomers(ctx context.Context, since time.Time) ([]keys.Customer, error)
}

// openQuota sets the quota, the in-flight slots and the tile cache: in
// REDIS_URL, whose client it returns, or in this process (nil).
func openQuota(ctx context.Context, c serveConfig, cfg *httpapi.Config, o *opened, log *slog.Logger) (redis.UniversalClient, error) {
	if c.redisURL == "" {
		cfg.Quota = quota.NewMemory(nil)
		cfg.InFlight = inflight.NewMemory()
		cfg.TileCache = tilecache.NewMemory(256<<20, c.tileCacheTTL)
		log.Warn("no REDIS_URL: quotas are held in this process and hold per process only; run one process, or set REDIS_URL")
		return nil, nil
	}
	rdb, err := openBatchedRedis("REDIS_URL", c.redisURL, c.redisBatch)
	if err != nil {
		return nil, err
	}
	o.onClose(func() { rdb.Close() })
	o.reserve += redisConns(rdb)
	if err := pingRedis(ctx, rdb); err != nil {
		if c.requireRedis {
			return nil, fmt.Errorf("REDIS_URL does not answer (-require-redis): %w", err)
		}
		unmetered := "requests are served UNMETERED until it answers"
		if cfg.FailClosed {
			unmetered = "metered requests are refused (503) until it answers"
		}
		log.Error("REDIS_URL does not answer at startup: "+unmetered+"; see /readyz, or set TILEAPI_REQUIRE_REDIS=1 to refuse to start", "err", err)
	} else if err := checkEviction(ctx, rdb, c.allowEvictingRedis, log); err != nil {
		return nil, err
	}
	cfg.Quota = quota.NewRedis(rdb, quota.WithPrefix(c.redisPrefix+"q:"))
	cfg.InFlight = inflight.NewRedis(rdb, inflight.WithLease(c.inFlightLease), inflight.WithPrefix(c.redisPrefix+"f:"))
	cfg.TileCache = hotTiles(tilecache.NewRedis(rdb, c.redisPrefix+"tile:", c.tileCacheTTL), c.tileCacheHotMB)
	cfg.Ready = append(cfg.Ready, httpapi.Check{
		Name: "redis", Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		Optional: !cfg.FailClosed, // fail-open still serves without it
		// A Redis slower than the quota's budget fails every call.
		Timeout: c.quotaTimeout,
	})
	return rdb, nil
}

// openTileCache moves the tile cache to a Redis of its own, which may
// evict, where TILEAPI_TILE_CACHE_REDIS_URL names one; quotas stay in
// REDIS_URL (or this process).
func openTileCache(ctx context.Context, c serveConfig, cfg *httpapi.Config, o *opened, log *slog.Logger) error {
	if c.tileCacheRedisURL == "" {
		return nil
	}
	cache, err := openBatchedRedis("TILEAPI_TILE_CACHE_REDIS_URL", c.tileCacheRedisURL, c.redisBatch)
	if err != nil {
		return err
	}
	o.onClose(func() { cache.Close() })
	o.reserve += redisConns(cache)
	if err := pingRedis(ctx, cache); err != nil {
		log.Error("TILEAPI_TILE_CACHE_REDIS_URL does not answer at startup: every tile is a miss until it answers", "err", err)
	}
	cfg.TileCache = apartCache{hotTiles(tilecache.NewRedis(cache, c.redisPrefix+"tile:", c.tileCacheTTL), c.tileCacheHotMB)}
	cfg.Ready = append(cfg.Ready, httpapi.Check{
		Name: "tile-cache", Ping: func(ctx context.Context) error { return cache.Ping(ctx).Err() },
		Optional: true, // a tile cache that fails is a miss
		Timeout:  c.quotaTimeout,
	})
	return nil
}

// hotTiles is r with its hottest mb MiB of tiles kept in process too,
// unless mb is 0.
func hotTiles(r *tilecache.Redis, mb int) httpapi.TileCache {
	if mb == 0 {
		return r
	}
	return tilecache.NewHot(r, mb<<20)
}

// openData sets the spatial backend and returns the key store: PostGIS
// and PostgreSQL, or the bundled dataset and keys in memory. With both
// PostgreSQL and Redis (rdb), what customers buy by the day or month
// survives losing Redis: every charge is written to the ledger, and a
// counter Redis lost is restored from it. The usage history is written
// with the ledger's batches to PostgreSQL, or held in process.
func openData(ctx context.Context, c serveConfig, cfg *httpapi.Config, rdb redis.UniversalClient, o *opened, log *slog.Logger) (keyStore, error) {
	if c.databaseURL == "" {
		start := time.Now()
		d, err := dataset.Load()
		if err != nil {
			return nil, err
		}
		cfg.Geofence, cfg.Tiles = geofence.NewMemory(d), tiles.NewMemory(d)
		cfg.DataVersion = dataversion.Fixed("embedded")
		hist := usagehist.NewMemory(c.usageRetention, usagehist.DefaultMaxRows, nil)
		cfg.Usage, cfg.UsageReader = recorder(c, hist), hist
		log.Info("no DATABASE_URL: serving the bundled dataset from memory; keys live in memory",
			"places", len(d.Places), "fences", len(d.Fences), "load_time", time.Since(start).Round(time.Millisecond))
		if err := openSources(ctx, c, cfg, nil, o, log); err != nil {
			return nil, err
		}
		return keys.NewMemory(), nil
	}
	pool, err := openPool(ctx, c.databaseURL, c.dbMaxConns)
	if err != nil {
		return nil, err
	}
	o.onClose(pool.Close)
	o.reserve += c.dbMaxConns
	cfg.Geofence, cfg.Tiles = geofence.NewPostGIS(pool, c.queryTimeout), tiles.NewPostGIS(pool, c.queryTimeout)
	// Read again on an interval, so a load shows without a restart, and
	// no request waits for it.
	vctx, stopVersion := context.WithCancel(ctx)
	o.onClose(stopVersion)
	read := func(ctx context.Context) (string, error) { return seed.Version(ctx, pool) }
	if cfg.DataVersion, err = dataversion.Start(vctx, read, c.dataVersionEvery, log); err != nil {
		return nil, err
	}
	if err := openSources(ctx, c, cfg, pool, o, log); err != nil {
		return nil, err
	}
	cfg.Ready = append(cfg.Ready, httpapi.Check{Name: "database", Ping: pool.Ping})
	led := ledger.New(pool, ledger.Options{FlushEvery: c.ledgerFlush, Logger: log})
	hist := usagehist.NewPostgres(pool)
	cfg.Usage, cfg.UsageReader = recorder(c, led), hist
	cfg.Billing = billing.NewPostgres(pool) // GET /admin/usage/export
	if rdb != nil {
		counters := quota.NewRedis(rdb, quota.WithPrefix(c.redisPrefix+"q:"), quota.WithPeriodSource(led))
		led.RaiseIn(counters)
		cfg.Quota = led.Store(counters)
	}
	if c.alertsURL != "" {
		out, err := alerts.New(pool, alerts.Options{URL: c.alertsURL, Secret: c.alertsSecret, Logger: log})
		if err != nil {
			return nil, err
		}
		cfg.Alerts = out
		actx, stopAlerts := context.WithCancel(ctx)
		delivered := make(chan struct{})
		go func() { out.Run(actx); close(delivered) }()
		o.onClose(func() { stopAlerts(); <-delivered }) // before the pool closes
		log.Info("threshold alerts are posted to the webhook", "url", redact(c.alertsURL, true))
	}
	lctx, stopLedger := context.WithCancel(ctx)
	var running sync.WaitGroup
	running.Go(func() { led.Run(lctx) })
	running.Go(func() { hist.Run(lctx, c.usageRetention, log) })
	o.onClose(func() { stopLedger(); running.Wait() }) // the last write, before the pool closes
	return keys.NewPostgres(pool), nil
}

// recorder is r, where the usage history is recorded, or else
// usagehist.Discard.
func recorder(c serveConfig, r usagehist.Recorder) usagehist.Recorder {
	if !c.usage {
		return usagehist.Discard
	}
	return r
}

// openSources sets the layers and geofence sets served: the bundled ones
// (cfg.Tiles, cfg.Geofence), the layers file's and, with -discover, the
// tables discovery finds; and refuses plans that price one that is not.
func openSources(ctx context.Context, c serveConfig, cfg *httpapi.Config, pool *pgxpool.Pool, o *opened, log *slog.Logger) error {
	opts, err := sourceOptions(c.layersFile, c.discover, pool, c.queryTimeout)
	if err != nil {
		return err
	}
	opts.BundledTiles, opts.BundledSets = cfg.Tiles, cfg.Geofence
	p, err := sources.Open(ctx, opts)
	if err != nil {
		return err
	}
	o.onClose(p.Close)
	for _, w := range p.Warnings {
		log.Warn("layers: " + w)
	}
	for _, sk := range p.Skipped {
		log.Info("discovery skipped a table", "table", sk.Table, "reason", sk.Reason)
	}
	cfg.Layers, cfg.Sets = p.Layers, p.Sets
	if err := cfg.Plans.CheckLayers(p.Layers.Names(), p.Sets.Names()); err != nil {
		return err
	}
	if c.layersFile != "" || c.discover {
		log.Info("serving your own layers and geofence sets", "layers", len(p.Layers.Names()), "sets", len(p.Sets.Names()))
	}
	return nil
}

// openKeys adds the demo keys to store and sets the key index that
// requests are answered from, still empty: the caller refreshes it.
func openKeys(ctx context.Context, c serveConfig, cfg *httpapi.Config, store keyStore, demo []demoKey, stdout io.Writer) (*keys.Index, error) {
	cfg.KeyAdmin = store
	if err := addDemoKeys(ctx, store, demo, stdout); err != nil {
		return nil, err
	}
	index := keys.NewIndex(store, c.keyCacheTTL)
	cfg.Keys = index
	if len(demo) > 0 {
		cfg.DemoKey = demo[0].secret // prefilled in the demo page
	}
	return index, nil
}

// serveListeners serves the public listener and the admin one until ctx
// ends or either fails: then both stop.
func serveListeners(ctx context.Context, c serveConfig, srv *httpapi.Server, conns int, log *slog.Logger) error {
	if c.adminOnPublic {
		log.Warn("the admin API is served on the public listener too (TILEAPI_ADMIN_ON_PUBLIC)")
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	adminDone := make(chan error, 1)
	if c.adminAddr == "none" {
		adminDone <- nil
	} else {
		go func() {
			err := listenAndServe(sctx, "admin", c.adminAddr, adminConns, srv.AdminHandler(), log)
			if err != nil {
				err = fmt.Errorf("admin listener (TILEAPI_ADMIN_ADDR): %w", err)
			}
			stop()
			adminDone <- err
		}()
	}
	err := listenAndServe(sctx, "public", c.addr, conns, srv, log)
	stop()
	return errors.Join(err, <-adminDone)
}

// servePprof serves Go's runtime profiles on their own listener, apart
// from the API (they reveal internals and cost CPU to take), until ctx is
// done. The address may have port 0; the one taken is logged.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Warn("profiles served: keep this address private", "pprof_addr", ln.Addr().String())
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}

// openRedis opens a client that honours context deadlines on every read
// and write (ContextTimeoutEnabled): without it a hung Redis holds a call
// for the client's own read timeout, whatever the request's time budget;
// and that never retries a command, which could charge twice.
// An error names the setting, never the URL, which may hold a password.
func openRedis(setting, url string) (redis.UniversalClient, error) {
	if sentinelURL(url) {
		return openSentinel(setting, url)
	}
	if strings.Contains(url, "addr=") {
		opt, err := redis.ParseClusterURL(trimAddrs(url))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", setting, urlError(err))
		}
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1 // see below
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, urlError(err))
	}
	opt.ContextTimeoutEnabled = true
	// A charge is not idempotent: a command retried on a new connection
	// after the old one broke may run twice, the first time unseen. The
	// failure policy answers a failed call instead.
	opt.MaxRetries = -1
	return redis.NewClient(opt), nil
}

// openBatchedRedis opens a client of its own for serve's users of the
// Redis at url (the quota, its in-flight leases, the tile cache): with
// batch, it coalesces their concurrent commands into pipelines
// (redisbatch), a property of this client alone.
func openBatchedRedis(setting, url string, batch bool) (redis.UniversalClient, error) {
	c, err := openRedis(setting, url)
	if err != nil || !batch {
		return c, err
	}
	redisbatch.Enable(c)
	return c, nil
}

// pingRedis checks at startup that Redis answers, within two seconds.
func pingRedis(ctx context.Context, rdb redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// redisLogger writes go-redis's log lines (reconnects, pool errors) as
// structured warnings.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}

func openPool(ctx context.Context, url string, maxConns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	return pool, nil
}

// maxHeaderBytes is the most request header bytes served; more is a 431.
const maxHeaderBytes = 16 << 10

// listenAndServe serves h on addr, holding at most maxConns connections
// open (see conncap), until ctx is done, then drains requests for up to 10
// seconds. name tells the listener in the log.
func listenAndServe(ctx context.Context, name, addr string, maxConns int, h http.Handler, log *slog.Logger) error {
	log = log.With("listener", name)
	srv := &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		// net/http allows 4 KiB above MaxHeaderBytes: this makes 16 KiB.
		MaxHeaderBytes: maxHeaderBytes - 4<<10,
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("serving", "addr", ln.Addr().String(), "max_conns", maxConns)
	errc := make(chan error, 1)
	go func() { errc <- conncap.New(ln, maxConns).Serve(srv) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
