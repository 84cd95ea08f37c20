package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"
	"github.com/paulmach/orb/maptile"
	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/param"

	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/cost"
	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/tilecache"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/tiles"
)

// handleWithin serves GET /v1/geofence/{set}/within?lng=&lat=&radius=&limit=
// [&geometry=true] (and /v1/geofence/within, the bundled places, for set
// ""): the set's features within radius metres, nearest first. The price
// grows with the searched area; with geometry, by the answer's size.
func (s *Server) handleWithin(bundled string) http.HandlerFunc {
	parse := func(v url.Values) (geofence.WithinQuery, error) {
		q, err := geofence.ParseWithin(v.Get("lng"), v.Get("lat"), v.Get("radius"), v.Get("limit"))
		if err == nil {
			q.Geometry, err = parseBool("geometry", v.Get("geometry"))
		}
		return q, err
	}
	return setHandler(s, bundled, "within", parse, func(c caller, set geofence.Set, price cost.Model, q geofence.WithinQuery) metered {
		var overPlan error
		if q.Radius > c.plan.MaxRadius {
			overPlan = &overPlanError{plan: c.plan, radius: q.Radius}
		}
		sized := q.Geometry && !set.PointsOnly
		m := metered{
			route:    "within",
			set:      set.Name,
			where:    pointAt(q.Lng, q.Lat),
			cost:     price.Radius(q.Radius),
			overPlan: overPlan,
			fits: func(p *problem, budget int64) {
				p.Field, p.MaxRadius = "radius", price.LargestRadius(budget)
			},
			work: func(ctx context.Context) (*response, error) {
				fs, err := set.Source.Within(ctx, q)
				if err != nil {
					return nil, err
				}
				return setAnswer(fs, sized, price)
			},
		}
		if sized {
			m.cost = max(m.cost, price.GeometryBound())
		}
		return m
	})
}

// handleContains serves GET /v1/geofence/{set}/contains?lng=&lat=
// [&geometry=true] (and /v1/geofence/contains, the bundled countries and
// counties, for set ""): the set's polygons that contain the point. With
// geometry it is priced by the size of the answer (cost.Model.GeometryBytes).
func (s *Server) handleContains(bundled string) http.HandlerFunc {
	parse := func(v url.Values) (geofence.ContainsQuery, error) {
		q, err := geofence.ParseContains(v.Get("lng"), v.Get("lat"))
		if err == nil {
			q.Geometry, err = parseBool("geometry", v.Get("geometry"))
		}
		return q, err
	}
	return setHandler(s, bundled, "contains", parse, func(c caller, set geofence.Set, price cost.Model, q geofence.ContainsQuery) metered {
		m := metered{
			route: "contains",
			set:   set.Name,
			where: pointAt(q.Lng, q.Lat),
			cost:  price.Flat,
			work: func(ctx context.Context) (*response, error) {
				fs, err := set.Source.Contains(ctx, q)
				if err != nil {
					return nil, err
				}
				return setAnswer(fs, q.Geometry, price)
			},
		}
		if q.Geometry {
			// Its size is known once it is made: charged the most an answer
			// with geometry costs, and settled down to its bytes.
			m.cost = price.GeometryBound()
			m.fits = func(p *problem, budget int64) {
				if price.Flat <= budget {
					p.Field = "geometry" // without it, it fits
				}
			}
		}
		return m
	})
}

// setHandler serves one question (op) of a geofence set: it reads the set
// the request names (bundled, where the route names none) and the query
// (parse), answering a 400 for either, then meters the request as meter
// prices it at the set's price in the caller's plan (a 403 where the plan
// does not include the set).
func setHandler[Q any](s *Server, bundled, op string, parse func(url.Values) (Q, error),
	meter func(c caller, set geofence.Set, price cost.Model, q Q) metered) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		set, err := s.geofenceSet(r, bundled, op)
		var q Q
		if err == nil {
			q, err = parse(r.URL.Query())
		}
		if err != nil {
			writeProblem(w, problemFor(err))
			return
		}
		s.gate(w, r, func(c caller) (metered, error) {
			price, ok := c.plan.Cost.ForSet(set.Name)
			if !ok {
				return metered{}, &notInPlanError{plan: c.plan.Name, what: "geofence set", name: set.Name}
			}
			return meter(c, set, price, q), nil
		})
	}
}

// geofenceSet returns the set a request names (the bundled one for its
// route when bundled is set) if it answers op; a *param.Error for "set"
// otherwise.
func (s *Server) geofenceSet(r *http.Request, bundled, op string) (geofence.Set, error) {
	name := bundled
	if name == "" {
		name = chi.URLParam(r, "set")
	}
	set, ok := s.cfg.Sets.Lookup(name)
	switch {
	case !ok:
		return set, param.Invalid("set", "unknown geofence set %q; GET /v1/geofence lists them", name)
	case op == "within" && !set.Within, op == "contains" && !set.Contains:
		return set, param.Invalid("set", "geofence set %q does not answer %s (its features are not polygons)", name, op)
	}
	return set, nil
}

// setAnswer is a set's answer as GeoJSON; priced by its size when it
// carries geometry.
func setAnswer(fs []*geojson.Feature, sized bool, price cost.Model) (*response, error) {
	fc := geojson.NewFeatureCollection()
	fc.Features = fs
	resp, err := geoJSON(fc, len(fs))
	if err == nil && sized {
		resp.sized = price.GeometryBytes(len(resp.body))
	}
	return resp, err
}

// handleSets serves GET /v1/geofence: the geofence sets, with what each
// answers.
func (s *Server) handleSets(w http.ResponseWriter, r *http.Request) {
	s.gate(w, r, func(c caller) (metered, error) {
		return metered{
			route: "sets",
			cost:  c.plan.Cost.Flat,
			work: func(context.Context) (*response, error) {
				type entry struct {
					Name        string            `json:"name"`
					Description string            `json:"description"`
					Questions   []string          `json:"questions"`
					Fields      map[string]string `json:"fields"`
				}
				var es []entry
				for _, set := range s.cfg.Sets.All() {
					e := entry{Name: set.Name, Description: set.Description, Questions: []string{}, Fields: set.Fields}
					if set.Within {
						e.Questions = append(e.Questions, "within")
					}
					if set.Contains {
						e.Questions = append(e.Questions, "contains")
					}
					if e.Fields == nil {
						e.Fields = map[string]string{}
					}
					es = append(es, e)
				}
				return jsonResponse(map[string]any{"sets": es})
			},
		}, nil
	})
}

// handleCatalog serves GET /v1/tiles: the layers, with their TileJSON URLs.
func (s *Server) handleCatalog(w http.ResponseWriter, r *http.Request) {
	base, cache := s.baseURL(r)
	s.gate(w, r, func(c caller) (metered, error) {
		return metered{
			route: "catalog",
			cost:  c.plan.Cost.Flat,
			work: func(context.Context) (*response, error) {
				return jsonResponseWith(map[string]any{"layers": s.cfg.Layers.Entries(base + "/v1/tiles/{layer}.json")}, cache)
			},
		}, nil
	})
}

// handleTileJSON serves GET /v1/tiles/{layer}.json: TileJSON 3.0.0.
func (s *Server) handleTileJSON(w http.ResponseWriter, r *http.Request) {
	l, err := s.cfg.Layers.Lookup(chi.URLParam(r, "layer"))
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	base, cache := s.baseURL(r)
	s.gate(w, r, func(c caller) (metered, error) {
		return metered{
			route: "tilejson",
			layer: l.Name,
			cost:  c.plan.Cost.Flat,
			work: func(context.Context) (*response, error) {
				return jsonResponseWith(l.TileJSON(base+"/v1/tiles/"+l.Name+"/{z}/{x}/{y}.mvt"), cache)
			},
		}, nil
	})
}

// handleTile serves GET /v1/tiles/{layer}/{z}/{x}/{y}.mvt (and .pbf). A
// cached tile is charged the cheaper hit price; X-Tile-Cache says HIT or
// MISS. An empty tile costs one unit (cost.Model.EmptyTile): priced so up
// front when cached, settled down to it once rendered.
func (s *Server) handleTile(w http.ResponseWriter, r *http.Request) {
	l, t, err := s.cfg.Layers.Parse(chi.URLParam(r, "layer"), chi.URLParam(r, "z"), chi.URLParam(r, "x"), chi.URLParam(r, "y"))
	var params tiles.Params
	if err == nil {
		params, err = l.ParseParams(r.URL.Query())
	}
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	s.gate(w, r, func(c caller) (metered, error) {
		if !c.plan.Cost.SellsLayer(l.Name) {
			return metered{}, &notInPlanError{plan: c.plan.Name, what: "layer", name: l.Name}
		}
		return s.tileRequest(r, c, l, t, params), nil
	})
}

// hotCache is a tile cache that holds the hottest tiles in process:
// tilecache.Hot. A tile found there is known a hit before the charge, and
// charged its hit price in it.
type hotCache interface {
	Local(key string) ([]byte, bool)
}

// alongCache is a tile cache in the quota's own Redis, whose lookup can
// travel in the round trip of the charge: tilecache.Redis or
// tilecache.Hot.
type alongCache interface {
	Along(key string) *tilecache.Read
}

// chargerWith is a quota store that sends commands with a charge:
// quota.DenyCache over quota.Redis.
type chargerWith interface {
	ChargeWith(ctx context.Context, identity string, plan quota.Plan, cost int64, along ...redis.Cmder) (quota.Decision, bool, error)
}

// tileLookup is what the tile cache holds for one request's tile, once
// looked up.
type tileLookup struct {
	key    string
	done   bool
	hit    bool
	cached []byte
}

// tileRequest prices a tile by whether the cache holds it, and renders and
// caches it on a miss. A tile held in process (the cache in process, or
// a hot tile of tilecache.Hot) is found first, for nothing, and charged
// its price in one charge. Else, with the cache in Redis, the lookup rides
// with the charge (see chargeTile): one round trip for a hit and for a
// miss.
func (s *Server) tileRequest(r *http.Request, c caller, l tiles.Layer, t maptile.Tile, params tiles.Params) metered {
	lk := &tileLookup{key: fmt.Sprintf("%s/%s/%d/%d/%d", s.cfg.DataVersion.Current(), l.Name, t.Z, t.X, t.Y)}
	if k := params.Key(); k != "" {
		lk.key += "?" + k
	}
	z := int(t.Z)
	missPrice, hitPrice := c.plan.Cost.Tile(l.Name, z), c.plan.Cost.CachedTile(l.Name, z)
	envelope := t.Bound()
	m := metered{
		route: "tile",
		layer: l.Name,
		where: &envelope,
		cost:  missPrice,
		fits: func(p *problem, budget int64) {
			if lz, ok := c.plan.Cost.LowestZoom(l.Name, l.MinZoom, l.MaxZoom, budget); ok {
				p.Field, p.LowestZoom = "z", &lz
			}
		},
		work: func(ctx context.Context) (*response, error) {
			if !lk.done { // not charged: shadow mode, or the caller's slots full
				s.lookUp(ctx, lk)
			}
			body, state := lk.cached, "HIT"
			if !lk.hit {
				var err error
				if body, err = l.Tile(ctx, t, params); err != nil {
					return nil, err
				}
				s.cacheLater(ctx, lk.key, body)
				state = "MISS"
			}
			sum := sha256.Sum256(body)
			return &response{
				contentType: tiles.MediaType,
				body:        body,
				etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
				empty:       !lk.hit && len(body) == 0, // a cached one is priced empty up front
				header: http.Header{
					"X-Tile-Cache":  {state},
					"Cache-Control": {"private, max-age=3600"},
				},
			}, nil
		},
	}
	if h, ok := s.cfg.TileCache.(hotCache); ok {
		if body, hit := h.Local(lk.key); hit {
			s.looked(r.Context(), lk, body, true, nil)
			m.cost = cachedPrice(c, lk, hitPrice)
			return m
		}
	}
	p, ok := s.cfg.TileCache.(alongCache)
	if !ok {
		if s.lookUp(r.Context(), lk); lk.hit {
			m.cost = cachedPrice(c, lk, hitPrice)
		}
		return m
	}
	m.charge = func(ctx context.Context, store quotahttp.Store) (quota.Decision, error) {
		return s.chargeTile(ctx, r, store, c, p, lk, missPrice, hitPrice)
	}
	return m
}

// chargeTile charges a tile at the miss price with its cache lookup in the
// same round trip (quota.Redis.ChargeWith), then prices what the cache
// holds (priceCached).
func (s *Server) chargeTile(ctx context.Context, r *http.Request, store quotahttp.Store, c caller, p alongCache, lk *tileLookup, missPrice, hitPrice int64) (quota.Decision, error) {
	d, looked, err := s.chargeLookingUp(ctx, store, c, p, lk, missPrice)
	if !looked || !lk.hit {
		return d, err
	}
	return s.priceCached(ctx, r, store, c, lk, d, err, missPrice, hitPrice)
}

// chargeLookingUp charges the miss price with the tile's lookup along and
// fills lk from its answer. Where the lookup could not ride along (the
// quota in process) it is made on its own; where Redis failed the tile is
// a miss, with no second wait. It reports false, lk not looked up, when
// the deny cache refused the least a tile can cost (a cached empty one):
// whether the tile is cached changes nothing then, so a client hammering
// after its 429 costs no round trip, not even the lookup.
func (s *Server) chargeLookingUp(ctx context.Context, store quotahttp.Store, c caller, p alongCache, lk *tileLookup, missPrice int64) (quota.Decision, bool, error) {
	var (
		d    quota.Decision
		sent bool
		err  error
		read = p.Along(lk.key)
	)
	if with, ok := store.(chargerWith); ok {
		d, sent, err = with.ChargeWith(ctx, c.identity, c.plan.Quota, missPrice, read.Cmds()...)
	} else {
		d, err = store.Charge(ctx, c.identity, c.plan.Quota, missPrice)
	}
	switch {
	case storeFailure(err) != err:
		s.looked(ctx, lk, nil, false, nil)
	case sent:
		body, hit, rerr := read.Result()
		s.looked(ctx, lk, body, hit, rerr)
	case err == nil && !d.Allowed && s.deniedFromMemory(c, c.plan.Cost.EmptyTile()):
		return d, false, nil
	default:
		s.lookUp(ctx, lk)
	}
	return d, true, err
}

// priceCached turns d (or err), the charge of a cached tile at the miss
// price, into the charge of its hit price (an empty one's, one unit): an
// admitted charge is lowered off the client's path (lowerTile); one the
// miss price did not fit is made again at the hit price, the only second
// round trip.
func (s *Server) priceCached(ctx context.Context, r *http.Request, store quotahttp.Store, c caller, lk *tileLookup, d quota.Decision, err error, missPrice, hitPrice int64) (quota.Decision, error) {
	if hitPrice = cachedPrice(c, lk, hitPrice); hitPrice >= missPrice {
		return d, err
	}
	switch {
	case err == nil && d.Allowed:
		return s.lowerTile(ctx, r, store, c, d, hitPrice), nil
	case err == nil || errors.Is(err, quota.ErrTooCostly):
		return store.Charge(ctx, c.identity, c.plan.Quota, hitPrice)
	}
	return d, err
}

// cachedPrice is the price of a tile the cache holds: its hit price, or
// that of an empty tile if it holds nothing.
func cachedPrice(c caller, lk *tileLookup, hitPrice int64) int64 {
	if len(lk.cached) == 0 {
		return min(hitPrice, c.plan.Cost.EmptyTile())
	}
	return hitPrice
}

// deniedFromMemory reports whether the deny cache refuses c a charge of
// cost without asking Redis.
func (s *Server) deniedFromMemory(c caller, cost int64) bool {
	_, denied := s.denials.Denies(c.identity, c.plan.Quota, cost)
	return denied
}

// lookUp reads the request's tile from the cache; a slow or failing cache
// counts as a miss.
func (s *Server) lookUp(ctx context.Context, lk *tileLookup) {
	body, hit, err := s.tileCache.Get(ctx, lk.key)
	s.looked(ctx, lk, body, hit, err)
}

func (s *Server) looked(ctx context.Context, lk *tileLookup, body []byte, hit bool, err error) {
	if err != nil {
		s.log.WarnContext(ctx, "tile cache read failed", "err", err)
		hit = false
	}
	lk.done, lk.hit, lk.cached = true, hit, body
	state := "MISS"
	if hit {
		state = "HIT"
	}
	s.metrics.tileCache.WithLabelValues(state).Inc()
}

// lowerTile returns d, a charge at the miss price, as it stands once
// lowered to the hit price, and settles that in the background (retried
// like a refund), so the client does not wait for it. The receipt stays
// the one charged: a refund with it gives back the whole charge before the
// settlement and nothing after, never too much. A plan that prices work
// has the charge settled again after the work, on the lowered receipt, so
// there the lowering is made first, on the client's path.
func (s *Server) lowerTile(ctx context.Context, r *http.Request, store quotahttp.Store, c caller, d quota.Decision, hitPrice int64) quota.Decision {
	if c.plan.Cost.Settle != nil {
		rc, ok, err := store.Settle(ctx, d.Receipt, hitPrice)
		if err != nil || !ok {
			s.log.ErrorContext(ctx, "lowering a cached tile to its price failed; it stays charged the miss price", "err", err)
			return d
		}
		s.metrics.unitsRefunded.WithLabelValues(c.plan.Name).Add(float64(d.Cost - hitPrice))
		lowered := d.Given(d.Cost - hitPrice)
		lowered.Receipt = rc
		return lowered
	}
	// In the background, retried by the gate like a refund; the observer
	// counts the units once they are back, in the usage row that ctx (not
	// the handler's r) carries.
	if !s.meter.SettleLater(r.WithContext(ctx), c.identity, c.plan.Quota, d, hitPrice) {
		s.log.ErrorContext(ctx, "lowering a cached tile to its price not tried: the gate owes too much already; it stays charged the miss price", "units", d.Cost-hitPrice)
		return d
	}
	return d.Given(d.Cost - hitPrice)
}

// cacheLater stores a rendered tile without keeping the client waiting.
// While too many writes are in flight (a slow cache) the tile is not
// cached: it is rendered again next time.
func (s *Server) cacheLater(ctx context.Context, key string, tile []byte) {
	select {
	case s.cacheWrites <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-s.cacheWrites }()
		if err := s.tileCache.Set(context.WithoutCancel(ctx), key, tile); err != nil {
			s.log.WarnContext(ctx, "tile cache write failed", "err", err)
		}
	}()
}

// handleQuota serves GET /v1/quota: the caller's usage of each limit of its
// plan. It is not charged.
func (s *Server) handleQuota(w http.ResponseWriter, r *http.Request) {
	c, err := s.identify(r)
	if err == nil {
		err = s.checkAccess(r, c, access.RouteQuota, "", "")
		if err == nil {
			err = c.tokenAllows(metered{route: "quota"})
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.meter.ServeUsage(w, r, c.identity, c.plan.Quota, func(w http.ResponseWriter, _ *http.Request, d quota.Decision) {
		writeJSON(w, http.StatusOK, usageOf(c.plan.Name, d))
	})
}

// fail answers err as its problem, logging what is the server's fault.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.failMetered(w, r, metered{}, err)
}

// failMetered answers err, an error of m's request, as its problem: a
// price beyond the plan says what the route could serve within it.
func (s *Server) failMetered(w http.ResponseWriter, r *http.Request, m metered, err error) {
	p := problemFor(err)
	if m.fits != nil && errors.Is(err, quota.ErrTooCostly) {
		m.fits(p, p.MaxCost)
	}
	if p.Status >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "err", err)
	}
	writeProblem(w, p)
}

// geoJSON is the response of v, a collection of n features.
func geoJSON(v any, n int) (*response, error) {
	resp, err := jsonResponse(v)
	if err == nil {
		resp.contentType, resp.features = "application/geo+json", n
	}
	return resp, err
}

func jsonResponse(v any) (*response, error) { return jsonResponseWith(v, nil) }

// jsonResponseWith is the JSON response of v with the extra headers h.
func jsonResponseWith(v any, h http.Header) (*response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("httpapi: encode: %w", err)
	}
	return &response{contentType: "application/json", body: b, header: h}, nil
}

// parseBool reads "true" or "false", spelt so; empty is false.
func parseBool(name, s string) (bool, error) {
	switch s {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, param.Invalid(name, "must be true or false")
}
