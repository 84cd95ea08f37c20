// Package plans defines what each API key may spend: a plan's quota limits,
// its largest radius and how it prices requests. Defaults are compiled in;
// a JSON file can replace or add plans by name.
package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tileapi/tileapi/cost"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/quota"
)

// Anonymous is the plan of requests that carry no API key.
const Anonymous = "anonymous"

// Plan is one plan.
type Plan struct {
	Name string
	// Quota holds the limits every charge must fit in; a day or month
	// limit the plan lets go on past its max as metered overage (a soft
	// cap, the plans file's "overage") is Soft.
	Quota quota.Plan
	// MaxRadius is the largest radius, in metres, of a search.
	MaxRadius float64
	// Cost prices the plan's requests.
	Cost cost.Model
	// MaxInFlight is the most requests of one key in progress at once,
	// across every server; 0 means no limit.
	MaxInFlight int
	// Alerts are the thresholds of the plan's period limits whose crossing
	// sends an alert (see internal/alerts).
	Alerts Alerts
}

// DefaultCost is the cost model of the compiled-in plans: a search of 2 km
// costs one unit (5 km: 7, 10 km: 25, 20 km: 100); a tile costs one unit at
// or above its layer's reference zoom and four times more each zoom out, up
// to the layer's cap; a cached tile a quarter of that; an empty tile one
// (cost.Model.EmptyTile); anything else one.
func DefaultCost() cost.Model {
	return cost.Model{
		RadiusUnit: 2000,
		Tiles: map[string]cost.TileModel{
			"places":    {RefZoom: 10, Max: 16},
			"counties":  {RefZoom: 8, Max: 16},
			"countries": {RefZoom: 4, Max: 8},
			// The operator's own layers (a layers file): one unit from
			// zoom 12, at most 16 at zoom 10 and below.
			cost.AnyLayer: {RefZoom: 12, Max: 16},
		},
		HitDivisor: 4,
		Flat:       1,
		// An answer with geometry: a unit per 4 KiB (a tile of one unit at
		// zoom 10 is about 2.6 KiB), at most the dearest tile's 16, which
		// is charged up front and settled down to the bytes returned.
		Geometry: &cost.GeometryModel{UnitBytes: 4096, Max: 16},
	}
}

// Defaults returns the compiled-in plans.
func Defaults() Set {
	plan := func(name string, burst, minute, month int64, maxRadius float64, inFlight int) Plan {
		limits := []quota.Limit{
			{Name: "burst", Max: burst, Window: 5 * time.Second},
			{Name: "minute", Max: minute, Window: time.Minute},
		}
		var alerts Alerts
		if month > 0 {
			limits = append(limits, quota.PerMonth(month))
			// Sent only where a webhook is configured.
			alerts = Alerts{"month": {80, 100}}
		}
		return Plan{
			Name:        name,
			Quota:       quota.Plan{Name: name, Limits: limits},
			MaxRadius:   maxRadius,
			Cost:        DefaultCost(),
			MaxInFlight: inFlight,
			Alerts:      alerts,
		}
	}
	s, err := newSet([]Plan{
		// The anonymous plan has no month: its identities are client
		// networks, which a client can change, so a month per network
		// bounds little and would keep a counter for a month for every
		// network that ever called. Its state goes with its windows.
		plan(Anonymous, 30, 120, 0, 5_000, 6),
		// A map's first view of 1024x768 pixels, three layers, costs the
		// free plan up to about 220 units (zoom 3 over the United
		// States; 30 at zoom 10): the burst holds the costliest with
		// room for the six tiles a browser has in flight at once, each
		// charged its price until it is found empty; the minute, five of
		// them.
		plan("free", 300, 1200, 100_000, 20_000, 8),
		plan("pro", 1000, 12_000, 5_000_000, 50_000, 32),
	}, 0)
	if err != nil {
		panic(err) // the compiled-in plans are valid: TestDefaults
	}
	return s
}

// Set is a validated set of plans.
type Set struct {
	byName map[string]Plan
	names  []string
	// history is the longest window of the plans a key may be on: every
	// key plan keeps its charges that long (quota.Plan.History), so a key
	// moved between them loses none of its history.
	history time.Duration
}

// History returns how long every plan a key may be on keeps a charge: the
// longest window among them.
func (s Set) History() time.Duration { return s.history }

// Lookup returns the plan called name.
func (s Set) Lookup(name string) (Plan, bool) {
	p, ok := s.byName[name]
	return p, ok
}

// Names returns the plans' names, sorted.
func (s Set) Names() []string { return slices.Clone(s.names) }

// All returns the plans, sorted by name.
func (s Set) All() []Plan {
	ps := make([]Plan, len(s.names))
	for i, n := range s.names {
		ps[i] = s.byName[n]
	}
	return ps
}

// NoInFlightLimit returns the names of the key plans (every plan but the
// anonymous one) without a max_in_flight, sorted. A server killed leaves a
// key charged for each request of it that the server had admitted and not
// answered: a plan's max_in_flight bounds those across every server; without
// one, only the server's connection cap does.
func (s Set) NoInFlightLimit() []string {
	var names []string
	for _, n := range s.names {
		if n != Anonymous && s.byName[n].MaxInFlight == 0 {
			names = append(names, n)
		}
	}
	return names
}

// CheckLayers reports a plan that prices tiles of a layer not in layers,
// or a geofence set not in sets, the layers and sets that exist: a
// misspelt name would leave the layer it meant unsold ("*" prices every
// other one).
func (s Set) CheckLayers(layers, sets []string) error {
	for _, p := range s.All() {
		for _, c := range []struct {
			what   string
			priced []string
			exist  []string
		}{
			{"tiles of layer", slices.Sorted(maps.Keys(p.Cost.Tiles)), layers},
			{"geofence set", slices.Sorted(maps.Keys(p.Cost.Sets)), sets},
		} {
			for _, name := range c.priced {
				if name != cost.AnyLayer && !slices.Contains(c.exist, name) {
					return fmt.Errorf("plans: plan %q prices %s %q, which does not exist; they are %s",
						p.Name, c.what, name, strings.Join(c.exist, ", "))
				}
			}
		}
	}
	return nil
}

// newSet validates ps and gives every plan but the anonymous one a history
// of at least history, and at least the longest window among them.
func newSet(ps []Plan, history time.Duration) (Set, error) {
	s := Set{byName: make(map[string]Plan, len(ps)), history: history}
	for _, p := range ps {
		if err := p.validate(); err != nil {
			return Set{}, err
		}
		if _, dup := s.byName[p.Name]; !dup {
			s.names = append(s.names, p.Name)
		}
		s.byName[p.Name] = p
	}
	slices.Sort(s.names)
	// The anonymous plan keeps its own windows only: its identities are
	// client networks, never charged under another plan, and no key may be
	// on it (KeyPlan).
	for name, p := range s.byName {
		if name != Anonymous {
			s.history = max(s.history, longestWindow(p.Quota))
		}
	}
	for name, p := range s.byName {
		if name != Anonymous {
			p.Quota.History = s.history
			s.byName[name] = p
		}
	}
	return s, nil
}

// longestWindow is the longest sliding window of q.
func longestWindow(q quota.Plan) time.Duration {
	var w time.Duration
	for _, l := range q.Limits {
		w = max(w, l.Window)
	}
	return w
}

// KeyPlan returns the plan a key on the plan called name with overrides o
// is charged under. It is the one check of a key's plan and overrides, for
// every way of setting them: the plan must exist and not be the anonymous
// plan, and the overrides must make a valid plan of it (see Plan.With). Its
// errors are *param.Error values naming "plan", or the override at fault
// ("limits[1].window"), and saying what is wrong.
func (s Set) KeyPlan(name string, o Overrides) (Plan, error) {
	p, err := s.keyable(name, "a key")
	if err != nil {
		return Plan{}, err
	}
	return p.With(o)
}

// CustomerLimitPrefix starts the name of each limit of a customer's plan
// (CustomerPlan): "customer.minute", told from the key's own "minute" in
// a decision and in the headers that name the binding limit.
const CustomerLimitPrefix = "customer."

// TokenLimit is the name of the limit of a short-lived token's own budget,
// charged beside its key's limits.
const TokenLimit = "token"

// reserved reports, as an error, a limit name that a plan or an override
// may not take: the names of a customer's limits and of a token's budget,
// which are charged beside a key's own and must differ from them.
func reserved(name string) error {
	if name == TokenLimit || strings.HasPrefix(name, CustomerLimitPrefix) {
		return fmt.Errorf("limit %q: %q and names starting %q are reserved for a token's budget and a customer's limits", name, TokenLimit, CustomerLimitPrefix)
	}
	return nil
}

// CustomerPlan returns the quota plan of a customer on the plan called
// name, which every charge of the customer's keys must fit beside the
// key's own: the plan's limits, each named with CustomerLimitPrefix (soft
// where the plan's are: its overage), its time zone and the set's
// history. Prices, the largest radius and the
// in-flight limit are the key's plan's, never the customer's. It is the
// one check of a customer's plan, for every way of setting it: the plan
// must be one a key may be on (KeyPlan). Its errors are *param.Error
// values naming "plan".
func (s Set) CustomerPlan(name string) (quota.Plan, error) {
	p, err := s.keyable(name, "a customer")
	if err != nil {
		return quota.Plan{}, err
	}
	q := quota.Plan{Name: p.Quota.Name, Location: p.Quota.Location, History: p.Quota.History, Limits: slices.Clone(p.Quota.Limits)}
	for i := range q.Limits {
		q.Limits[i].Name = CustomerLimitPrefix + q.Limits[i].Name
	}
	if err := q.Validate(); err != nil {
		return quota.Plan{}, param.Invalid("plan", "%q cannot be a customer's: %v", name, err)
	}
	return q, nil
}

// keyable returns the plan called name if a key or a customer (who, for
// the error) may be on it: it exists and is not the anonymous plan. Its
// error is a *param.Error naming "plan" and the plans there are.
func (s Set) keyable(name, who string) (Plan, error) {
	p, ok := s.byName[name]
	if ok && name != Anonymous {
		return p, nil
	}
	var keyPlans []string
	for _, n := range s.names {
		if n != Anonymous {
			keyPlans = append(keyPlans, n)
		}
	}
	reason := "is not a configured plan"
	if name == Anonymous {
		reason = "is the plan of requests without a key"
	}
	return Plan{}, param.Invalid("plan", "%q %s; %s may be on %s", name, reason, who, strings.Join(keyPlans, ", "))
}

func (p Plan) validate() error {
	if p.Name == "" || p.Name != p.Quota.Name {
		return fmt.Errorf("plan %q: the name is empty or differs from its quota's", p.Name)
	}
	if err := p.Quota.Validate(); err != nil {
		return fmt.Errorf("plan %q: %w", p.Name, err)
	}
	// The anonymous plan's identities are client networks, which a client
	// can change at will: a day or month counter would outlive each one's
	// last request by up to a period, for every network that ever called,
	// where its windows are gone once they have passed.
	if p.Name == Anonymous {
		for _, l := range p.Quota.Limits {
			if l.Period != quota.Sliding {
				return fmt.Errorf("plan %q: limit %q counts by the %s: the anonymous plan takes sliding windows only", p.Name, l.Name, l.Period)
			}
		}
	}
	for _, l := range p.Quota.Limits {
		if err := reserved(l.Name); err != nil {
			return fmt.Errorf("plan %q: %w", p.Name, err)
		}
	}
	if !(p.MaxRadius > 0) {
		return fmt.Errorf("plan %q: max_radius_m must be positive", p.Name)
	}
	if err := p.Cost.Validate(); err != nil {
		return fmt.Errorf("plan %q: %w", p.Name, err)
	}
	// Every price must be one the quota can charge: a cost above
	// quota.MaxUnits is refused as an invalid charge, not as a request too
	// costly for the plan. A search costs at most its price at MaxRadius
	// (a larger radius is refused before it is priced), a tile at most its
	// layer's cap.
	if x := p.MaxRadius / p.Cost.RadiusUnit; x*x > quota.MaxUnits {
		return fmt.Errorf("plan %q: a search of max_radius_m %g costs more than %d units with radius_unit_m %g",
			p.Name, p.MaxRadius, int64(quota.MaxUnits), p.Cost.RadiusUnit)
	}
	if p.Cost.Flat > quota.MaxUnits {
		return fmt.Errorf("plan %q: cost: flat %d is above %d units", p.Name, p.Cost.Flat, int64(quota.MaxUnits))
	}
	if b := p.Cost.GeometryBound(); b > quota.MaxUnits {
		return fmt.Errorf("plan %q: cost: geometry: max %d is above %d units", p.Name, b, int64(quota.MaxUnits))
	}
	for layer, t := range p.Cost.Tiles {
		if t.Max > quota.MaxUnits {
			return fmt.Errorf("plan %q: cost: tiles %q: max %d is above %d units", p.Name, layer, t.Max, int64(quota.MaxUnits))
		}
	}
	if p.MaxInFlight < 0 {
		return fmt.Errorf("plan %q: max_in_flight must be 0 (no limit) or more", p.Name)
	}
	if err := p.Alerts.check(p.Quota); err != nil {
		return fmt.Errorf("plan %q: %w", p.Name, err)
	}
	return nil
}

// File is the JSON form of a plans file:
//
//	{"plans": [{"name": "free", "max_radius_m": 20000,
//	            "limits": [{"name": "burst", "max": 100, "window": "5s"},
//	                       {"name": "minute", "max": 600, "window": "1m"}],
//	            "cost": {"radius_unit_m": 2000, "hit_divisor": 4, "flat": 1,
//	                     "tiles": {"places": {"ref_zoom": 10, "max": 16}}}}]}
//
// A plan without "cost" takes DefaultCost; "max_in_flight" (the most
// requests of one key in progress at once) is optional, 0 or absent for no
// limit; "alerts" ({"month": [50, 80, 100]}) is optional, the Plan's
// Alerts; "overage" (["month"]) is optional, the day and month limits
// that go on past their max as metered overage instead of refusing (soft
// caps): every limit is a hard cap without it.
type File struct {
	// History is how long every plan a key may be on keeps a charge, when
	// longer than their longest window ("1h"): the longest window a key's
	// overrides may have.
	History string     `json:"history,omitempty"`
	Plans   []FilePlan `json:"plans"`
}

// FilePlan is one plan of a File.
type FilePlan struct {
	Name      string      `json:"name"`
	MaxRadius float64     `json:"max_radius_m"`
	Limits    []FileLimit `json:"limits"`
	Cost      *cost.Model `json:"cost,omitempty"`
	// MaxInFlight is Plan.MaxInFlight.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// TimeZone is the IANA zone ("Europe/Paris") whose midnights and firsts
	// of the month bound the plan's day and month limits; UTC if empty.
	TimeZone string `json:"time_zone,omitempty"`
	// Alerts is Plan.Alerts.
	Alerts Alerts `json:"alerts,omitempty"`
	// Overage names the plan's day and month limits that are soft caps
	// (quota.Limit.Soft).
	Overage []string `json:"overage,omitempty"`
}

// FileLimit is one limit of a FilePlan; Window is a Go duration ("5s",
// "1m", "1h30m").
type FileLimit struct {
	Name   string `json:"name"`
	Max    int64  `json:"max"`
	Window string `json:"window,omitempty"`
	// Period is "day" or "month" for a limit that counts by the calendar,
	// without a window.
	Period string `json:"period,omitempty"`
}

// Load returns the compiled-in plans, with those of the JSON file at path
// replacing or adding plans of the same name (see Parse). An empty path
// means the defaults alone.
func Load(path string) (Set, error) {
	if path == "" {
		return Defaults(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Set{}, fmt.Errorf("plans: %w", err)
	}
	s, err := parse(b)
	if err != nil {
		return Set{}, fmt.Errorf("plans: %s: %w", path, err)
	}
	return s, nil
}

// Parse returns the compiled-in plans, with those of b, a File in JSON,
// replacing or adding plans of the same name. A field the File does not
// have, a plan named twice and a plan that cannot be enforced or priced are
// errors that name the plan and what is wrong with it.
func Parse(b []byte) (Set, error) {
	s, err := parse(b)
	if err != nil {
		return Set{}, fmt.Errorf("plans: %w", err)
	}
	return s, nil
}

func parse(b []byte) (Set, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt field would silently take its default
	if err := dec.Decode(&f); err != nil {
		return Set{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Set{}, errors.New("data after the plans object")
	}
	if len(f.Plans) == 0 {
		return Set{}, errors.New("no plans")
	}
	var history time.Duration
	if f.History != "" {
		h, err := time.ParseDuration(f.History)
		if err != nil || h < 0 || h%time.Millisecond != 0 {
			return Set{}, fmt.Errorf("history %q is not a duration such as \"1h\" of whole milliseconds", f.History)
		}
		history = h
	}
	ps := Defaults().All()
	named := make(map[string]bool, len(f.Plans))
	for _, fp := range f.Plans {
		if named[fp.Name] {
			return Set{}, fmt.Errorf("plan %q is defined twice", fp.Name)
		}
		named[fp.Name] = true
		p, err := fp.plan()
		if err != nil {
			return Set{}, err
		}
		ps = append(ps, p)
	}
	return newSet(ps, history)
}

func (fp FilePlan) plan() (Plan, error) {
	p := Plan{Name: fp.Name, MaxRadius: fp.MaxRadius, Cost: DefaultCost(), Quota: quota.Plan{Name: fp.Name}, MaxInFlight: fp.MaxInFlight, Alerts: fp.Alerts}
	if fp.Cost != nil {
		p.Cost = *fp.Cost
	}
	if fp.TimeZone != "" {
		loc, err := time.LoadLocation(fp.TimeZone)
		if err != nil {
			return Plan{}, fmt.Errorf("plan %q: time_zone %q: %w", fp.Name, fp.TimeZone, err)
		}
		p.Quota.Location = loc
	}
	for _, fl := range fp.Limits {
		l, err := fl.limit()
		if err != nil {
			return Plan{}, fmt.Errorf("plan %q: limit %q: %w", fp.Name, fl.Name, err)
		}
		p.Quota.Limits = append(p.Quota.Limits, l)
	}
	if fp.Name == "" {
		return Plan{}, errors.New("a plan has no name")
	}
	if err := soften(&p.Quota, fp.Overage); err != nil {
		return Plan{}, fmt.Errorf("plan %q: %w", fp.Name, err)
	}
	return p, nil
}
