package httpapi

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/keys"
)

// CORSKeys, as the only entry of Config.AllowedOrigins, answers CORS for
// the origins that keys allow: a preflight (which carries no key) is
// allowed from an origin that some active key lists in its restrictions,
// and the real request is then checked against its own key's origins.
const CORSKeys = "keys"

// keyAccess holds each key's parsed restrictions, once per version of the
// key, as keyPlans holds its plan.
type keyAccess = byVersion[keyRestrictions]

// keyRestrictions is a key's restrictions, or why they could not be read.
type keyRestrictions struct {
	r   access.Restrictions
	err error
}

// invalidRestrictionsError refuses a key whose stored restrictions do not
// parse: they are checked when written, so this is a store written by
// something else; the key is never served unrestricted. It does not
// unwrap: the parse error is no fault of the request.
type invalidRestrictionsError struct{ err error }

func (e *invalidRestrictionsError) Error() string {
	return fmt.Sprintf("the key's restrictions are invalid: %v", e.err)
}

// restrictionsOf is k's restrictions, parsed once for each version of the
// key (when the key index takes it in), not at every request. Invalid ones
// are logged, and an error.
func (s *Server) restrictionsOf(k keys.Key) (access.Restrictions, error) {
	v := version{key: k.UpdatedAt}
	if kr, ok := s.keyAccess.get(k.ID, v); ok {
		return kr.r, kr.err
	}
	r, err := access.Parse(k.Restrictions)
	if err != nil {
		s.log.Error("a key's stored restrictions are invalid; refusing the key", "key", k.Prefix, "err", err)
		err = &invalidRestrictionsError{err: err}
	}
	s.keyAccess.put(k.ID, v, keyRestrictions{r: r, err: err})
	return r, err
}

// resolveAccess resolves what the server needs of a new version of k: its
// restrictions, and the origins CORS allows in keys mode.
func (s *Server) resolveAccess(k keys.Key) {
	r, err := s.restrictionsOf(k)
	if s.corsKeys != nil {
		s.corsKeys.update(k, r, err)
	}
}

// checkAccess checks c's request of route (access.Route*), for the layer
// or set, against its key's restrictions; an anonymous caller has none.
// A refusal is an *access.Refusal.
func (s *Server) checkAccess(r *http.Request, c caller, route, layer, set string) error {
	if c.key.ID == 0 {
		return nil
	}
	rs, err := s.restrictionsOf(c.key)
	if err != nil {
		return err
	}
	return rs.Check(access.Request{
		Origin: r.Header.Get("Origin"), Referer: r.Header.Get("Referer"),
		Client: middleware.GetClientIPAddr(r.Context()), // as the quota's: trusted-proxy aware
		Route:  route, Layer: layer, Set: set,
	})
}

// accessRoute is the name key restrictions give m's route.
func accessRoute(m metered) string {
	if m.route == "tile" {
		return access.RouteTiles
	}
	return m.route // "tilejson", "catalog", "sets", "within", "contains"
}

// corsKeys indexes the origin patterns of each active key that lists
// origins, for CORS in keys mode: an origin is looked up by the patterns
// that would admit it (access.OriginCandidates), as many lookups as its
// host has labels, whatever the number of keys.
type corsKeys struct {
	mu        sync.RWMutex
	byPattern map[string]map[int64]time.Time // pattern -> the keys listing it -> when each expires (zero: never)
	byKey     map[int64][]string             // key -> its patterns
}

// update takes in a version of k: an active key's origins are indexed,
// and those of anything else (revoked, without origins, unreadable)
// dropped.
func (c *corsKeys) update(k keys.Key, r access.Restrictions, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.byKey[k.ID] {
		delete(c.byPattern[p], k.ID)
		if len(c.byPattern[p]) == 0 {
			delete(c.byPattern, p)
		}
	}
	delete(c.byKey, k.ID)
	if err != nil || k.Revoked() || len(r.Origins) == 0 {
		return
	}
	if c.byKey == nil {
		c.byKey, c.byPattern = make(map[int64][]string), make(map[string]map[int64]time.Time)
	}
	c.byKey[k.ID] = r.OriginPatterns()
	for _, p := range c.byKey[k.ID] {
		if c.byPattern[p] == nil {
			c.byPattern[p] = make(map[int64]time.Time)
		}
		c.byPattern[p][k.ID] = k.ExpiresAt
	}
}

// allows reports whether some active key allows origin.
func (c *corsKeys) allows(origin string) bool {
	now := time.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, p := range access.OriginCandidates(origin) {
		for _, expires := range c.byPattern[p] {
			if expires.IsZero() || now.Before(expires) {
				return true
			}
		}
	}
	return false
}
