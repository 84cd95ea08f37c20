// Package access says where and for what an API key works: its
// restrictions (the JSON stored with the key, keys.Key.Restrictions) and
// the checks of a request against them.
//
// A restriction limits one dimension of a request: the web origin that
// sent it, the client network, the route, the tile layer, the geofence
// set. An absent or empty list restricts nothing on its dimension. A
// request a restriction refuses gets a *Refusal naming the dimension.
package access

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tileapi/tileapi/internal/param"
)

// The route names a restriction may list.
const (
	RouteTiles    = "tiles"    // GET /v1/tiles/{layer}/{z}/{x}/{y}.mvt
	RouteTileJSON = "tilejson" // GET /v1/tiles/{layer}.json
	RouteCatalog  = "catalog"  // GET /v1/tiles
	RouteWithin   = "within"   // GET /v1/geofence[/{set}]/within
	RouteContains = "contains" // GET /v1/geofence[/{set}]/contains
	RouteSets     = "sets"     // GET /v1/geofence
	RouteQuota    = "quota"    // GET /v1/quota
	RouteTokens   = "tokens"   // POST /v1/tokens
)

// Routes are the route names a restriction may list, in the order the
// documentation gives them.
var routes = []string{RouteTiles, RouteTileJSON, RouteCatalog, RouteWithin, RouteContains, RouteSets, RouteQuota, RouteTokens}

// Routes returns the route names a restriction may list.
func Routes() []string { return slices.Clone(routes) }

// Restrictions are where and for what a key works, as stored with it:
//
//	{"origins": ["https://app.example.com", "https://*.example.com"],
//	 "allow_no_origin": false, "networks": ["203.0.113.0/24"],
//	 "routes": ["tiles", "tilejson"], "layers": ["places"], "sets": ["places"]}
//
// Only Parse makes one that checks requests; the zero value restricts
// nothing.
type Restrictions struct {
	// Origins are the web origins (scheme://host[:port]) whose pages may
	// use the key; "*." as the leftmost label of the host stands for one
	// or more labels (never the bare domain).
	Origins []string `json:"origins,omitempty"`
	// AllowNoOrigin admits, for a key with Origins, a request with
	// neither Origin nor Referer (a server, a script, a native app).
	AllowNoOrigin bool `json:"allow_no_origin,omitempty"`
	// Networks are the client networks (CIDR prefixes, IPv4 or IPv6)
	// the key may be used from.
	Networks []string `json:"networks,omitempty"`
	// Routes are the routes the key may call (see Routes).
	Routes []string `json:"routes,omitempty"`
	// Layers are the tile layers the key may ask for.
	Layers []string `json:"layers,omitempty"`
	// Sets are the geofence sets the key may ask.
	Sets []string `json:"sets,omitempty"`

	origins  []origin
	networks []netip.Prefix
}

// Parse reads restrictions from their JSON, strictly: an unknown field, an
// origin that is not scheme://host[:port] (with at most a leftmost "*."
// wildcard over two or more labels), a network that is not a CIDR prefix,
// an unknown route or an empty name is a *param.Error naming the field
// and the value. Empty input ("", "null") restricts nothing.
func Parse(b []byte) (Restrictions, error) {
	var r Restrictions
	if t := bytes.TrimSpace(b); len(t) == 0 || string(t) == "null" {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Restrictions{}, param.Invalid("restrictions", "%v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return Restrictions{}, param.Invalid("restrictions", "must be one JSON object")
	}
	for i, s := range r.Origins {
		o, err := parseOrigin(s, true)
		if err != nil {
			return Restrictions{}, param.Invalid(fmt.Sprintf("origins[%d]", i), "%q: %v", s, err)
		}
		r.origins = append(r.origins, o)
	}
	for i, s := range r.Networks {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Restrictions{}, param.Invalid(fmt.Sprintf("networks[%d]", i), "%q: want a CIDR prefix such as 203.0.113.0/24 or 2001:db8::/32", s)
		}
		r.networks = append(r.networks, p.Masked())
	}
	for i, s := range r.Routes {
		if !slices.Contains(routes, s) {
			return Restrictions{}, param.Invalid(fmt.Sprintf("routes[%d]", i), "%q: want one of %s", s, strings.Join(routes, ", "))
		}
	}
	for _, f := range []struct {
		name  string
		names []string
	}{{"layers", r.Layers}, {"sets", r.Sets}} {
		for i, s := range f.names {
			if strings.TrimSpace(s) == "" {
				return Restrictions{}, param.Invalid(fmt.Sprintf("%s[%d]", f.name, i), "%q: want a name", s)
			}
		}
	}
	if r.AllowNoOrigin && len(r.Origins) == 0 {
		return Restrictions{}, param.Invalid("allow_no_origin", "true: only means something with origins")
	}
	return r, nil
}

// IsZero reports whether r restricts nothing.
func (r Restrictions) IsZero() bool {
	return len(r.Origins) == 0 && len(r.Networks) == 0 && len(r.Routes) == 0 && len(r.Layers) == 0 && len(r.Sets) == 0
}

// JSON is r's canonical JSON, as it is stored; nil for none.
func (r Restrictions) JSON() []byte {
	if r.IsZero() {
		return nil
	}
	b, _ := json.Marshal(r) // strings and a bool: cannot fail
	return b
}

// Request is what of a request the restrictions check.
type Request struct {
	// Origin and Referer are the request's headers of those names.
	Origin, Referer string
	// Client is the client's address, as the quota sees it.
	Client netip.Addr
	// Route is the route's name (see Routes); Layer and Set name the tile
	// layer or geofence set asked for, "" for none.
	Route, Layer, Set string
}

// Check returns nil if r admits req, else a *Refusal for the first
// dimension (origin, network, route, layer, set) that refuses it.
func (r Restrictions) Check(req Request) error {
	if err := r.CheckOrigin(req.Origin, req.Referer); err != nil {
		return err
	}
	if err := r.CheckNetwork(req.Client); err != nil {
		return err
	}
	if err := r.CheckRoute(req.Route); err != nil {
		return err
	}
	if err := r.CheckLayer(req.Layer); err != nil {
		return err
	}
	return r.CheckSet(req.Set)
}

// CheckOrigin admits a request by its Origin header or, without one, the
// origin of its Referer. A request with neither is refused for a key with
// origins unless AllowNoOrigin.
func (r Restrictions) CheckOrigin(originHeader, referer string) error {
	if len(r.origins) == 0 {
		return nil
	}
	from := strings.TrimSpace(originHeader)
	if from == "" {
		from = refererOrigin(strings.TrimSpace(referer))
	}
	if from == "" {
		if r.AllowNoOrigin {
			return nil
		}
		return &Refusal{Dimension: DimOrigin, Reason: "the request has neither Origin nor Referer, and the key allows only some origins"}
	}
	if r.AllowsOrigin(from) {
		return nil
	}
	return &Refusal{Dimension: DimOrigin, Value: from, Reason: "the key does not allow this origin"}
}

// AllowsOrigin reports whether origin (an Origin header's value) is one
// of r's origins. A key without origins allows every origin.
func (r Restrictions) AllowsOrigin(s string) bool {
	if len(r.origins) == 0 {
		return true
	}
	o, err := parseOrigin(s, false)
	if err != nil {
		return false
	}
	for _, p := range r.origins {
		if p.matches(o) {
			return true
		}
	}
	return false
}

// CheckNetwork admits a request from client, an address of one of r's
// networks; an invalid address is refused by a key with networks.
func (r Restrictions) CheckNetwork(client netip.Addr) error {
	if len(r.networks) == 0 {
		return nil
	}
	if client.IsValid() {
		client = client.Unmap().WithZone("")
		for _, p := range r.networks {
			if p.Contains(client) {
				return nil
			}
		}
		return &Refusal{Dimension: DimNetwork, Value: client.String(), Reason: "the key does not allow this client address"}
	}
	return &Refusal{Dimension: DimNetwork, Reason: "the client address could not be read, and the key allows only some networks"}
}

// CheckRoute admits a request of route (see Routes).
func (r Restrictions) CheckRoute(route string) error {
	if len(r.Routes) == 0 || slices.Contains(r.Routes, route) {
		return nil
	}
	return &Refusal{Dimension: DimRoute, Value: route, Reason: "the key does not allow this route"}
}

// CheckLayer admits a request for the tile layer (none: "").
func (r Restrictions) CheckLayer(layer string) error {
	if layer == "" || len(r.Layers) == 0 || slices.Contains(r.Layers, layer) {
		return nil
	}
	return &Refusal{Dimension: DimLayer, Value: layer, Reason: "the key does not allow this layer"}
}

// CheckSet admits a request of the geofence set (none: "").
func (r Restrictions) CheckSet(set string) error {
	if set == "" || len(r.Sets) == 0 || slices.Contains(r.Sets, set) {
		return nil
	}
	return &Refusal{Dimension: DimSet, Value: set, Reason: "the key does not allow this geofence set"}
}

// Dimension is what a restriction limits.
type Dimension string

// The dimensions, named as the restriction's JSON field.
const (
	DimOrigin  Dimension = "origins"
	DimNetwork Dimension = "networks"
	DimRoute   Dimension = "routes"
	DimLayer   Dimension = "layers"
	DimSet     Dimension = "sets"
)

// Refusal is a request a key's restrictions do not admit.
type Refusal struct {
	Dimension Dimension
	// Value is what of the request was refused ("" when it lacks it).
	Value  string
	Reason string
}

func (e *Refusal) Error() string {
	if e.Value == "" {
		return "access: " + e.Reason
	}
	return fmt.Sprintf("access: %s: %q", e.Reason, e.Value)
}
