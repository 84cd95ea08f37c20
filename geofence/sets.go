package geofence

import (
	"context"
	"fmt"
	"slices"

	"github.com/paulmach/orb/geojson"
)

// SetSource answers the questions of one geofence set. Each method is
// called only if the Set says it answers it, with a validated query; the
// features it returns are in their answer's order, within's with a
// "distance" property in metres; a feature carries its geometry (in WGS84,
// polygons wound as RFC 7946 wants) where the query's Geometry asks for it
// or, in a within answer, where the Set is PointsOnly, and a null geometry
// otherwise.
type SetSource interface {
	Within(ctx context.Context, q WithinQuery) ([]*geojson.Feature, error)
	Contains(ctx context.Context, q ContainsQuery) ([]*geojson.Feature, error)
}

// Set is one geofence set: features a request names by the set's name
// (/v1/geofence/{set}/within, /v1/geofence/{set}/contains).
type Set struct {
	Name        string
	Description string
	// Fields maps a property name to its type, for the catalog.
	Fields map[string]string
	// Within and Contains say which questions the set answers: within of
	// any geometry, contains of polygons only.
	Within, Contains bool
	// PointsOnly marks a set of points, whose within answers carry their
	// points always; other features carry their geometry only when the
	// query asks for it (priced by its size).
	PointsOnly bool
	Source     SetSource
}

// The bundled sets' names.
const (
	// PlacesSet is the bundled places (within): GET /v1/geofence/within.
	PlacesSet = "places"
	// BoundariesSet is the bundled countries and counties (contains):
	// GET /v1/geofence/contains.
	BoundariesSet = "boundaries"
)

// Bundled returns the bundled sets answered by b: a *PostGIS over the
// tables tileapi load fills, or a *Memory over the dataset.
func Bundled(b Backend) []Set {
	fences := map[string]string{"name": FieldString, "kind": FieldString, "code": FieldString}
	return []Set{
		{
			Name: PlacesSet, Description: "Populated places from GeoNames; feature id is the geonameid",
			Fields: map[string]string{"name": FieldString, "country": FieldString, "admin_code": FieldString,
				"feature_code": FieldString, "population": FieldNumber, DistanceProperty: FieldNumber},
			Within: true, PointsOnly: true, Source: bundledSource{b},
		},
		{
			Name: BoundariesSet, Description: "Countries (Natural Earth 1:50m) and US counties (Census Bureau 1:10m)",
			Fields: fences, Contains: true, Source: bundledSource{b},
		},
	}
}

type bundledSource struct{ b Backend }

func (s bundledSource) Within(ctx context.Context, q WithinQuery) ([]*geojson.Feature, error) {
	ns, err := s.b.Within(ctx, q)
	if err != nil {
		return nil, err
	}
	return NearCollection(ns).Features, nil
}

func (s bundledSource) Contains(ctx context.Context, q ContainsQuery) ([]*geojson.Feature, error) {
	fs, err := s.b.Contains(ctx, q)
	if err != nil {
		return nil, err
	}
	return FenceCollection(fs).Features, nil
}

// Sets is the geofence sets a server publishes, in order, by name.
type Sets struct {
	sets   []Set
	byName map[string]int
}

// NewSets returns the sets ss, in their order; each needs a Source, a
// question it answers and a name not used twice.
func NewSets(ss ...Set) (*Sets, error) {
	c := &Sets{byName: make(map[string]int, len(ss))}
	for _, s := range ss {
		switch _, dup := c.byName[s.Name]; {
		case s.Name == "":
			return nil, fmt.Errorf("geofence: a set has no name")
		case dup:
			return nil, fmt.Errorf("geofence: set %q: the name is used twice", s.Name)
		case s.Source == nil || !(s.Within || s.Contains):
			return nil, fmt.Errorf("geofence: set %q has no source or answers nothing", s.Name)
		}
		c.byName[s.Name] = len(c.sets)
		c.sets = append(c.sets, s)
	}
	return c, nil
}

// All returns the sets, in order.
func (c *Sets) All() []Set { return slices.Clone(c.sets) }

// Names returns the names of the sets, in order.
func (c *Sets) Names() []string {
	names := make([]string, len(c.sets))
	for i, s := range c.sets {
		names[i] = s.Name
	}
	return names
}

// Lookup returns the set called name, and false if there is none.
func (c *Sets) Lookup(name string) (Set, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Set{}, false
	}
	return c.sets[i], true
}
