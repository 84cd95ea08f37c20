package featurefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
)

// object is any GeoJSON object: a FeatureCollection, a Feature or a
// geometry, with the members this package reads.
type object struct {
	Type        string            `json:"type"`
	Features    []json.RawMessage `json:"features"`
	ID          json.RawMessage   `json:"id"`
	Geometry    json.RawMessage   `json:"geometry"`
	Properties  json.RawMessage   `json:"properties"`
	Coordinates json.RawMessage   `json:"coordinates"`
	// CRS is the "crs" member of GeoJSON before RFC 7946.
	CRS *struct {
		Properties struct {
			Name string `json:"name"`
		} `json:"properties"`
	} `json:"crs"`
}

// decodeGeoJSON reads a FeatureCollection, a Feature or a bare geometry.
func decodeGeoJSON(data []byte) (*Collection, error) {
	var top object
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not GeoJSON: %w", err)
	}
	if top.CRS != nil {
		name := top.CRS.Properties.Name
		if !strings.HasSuffix(name, "CRS84") && !strings.HasSuffix(name, ":4326") {
			return nil, fmt.Errorf("CRS %q is not WGS84 longitude/latitude (RFC 7946): reproject, e.g. ogr2ogr -t_srs EPSG:4326", name)
		}
	}
	c := &Collection{}
	fields := fieldSet{index: map[string]int{}}
	switch top.Type {
	case "FeatureCollection":
		for i, raw := range top.Features {
			var o object
			if err := json.Unmarshal(raw, &o); err != nil {
				return nil, fmt.Errorf("feature %d: %w", i, err)
			}
			f, err := o.feature(&fields)
			if err != nil {
				return nil, fmt.Errorf("feature %d: %w", i, err)
			}
			c.Features = append(c.Features, f)
		}
	case "Feature":
		f, err := top.feature(&fields)
		if err != nil {
			return nil, fmt.Errorf("feature 0: %w", err)
		}
		c.Features = []*geojson.Feature{f}
	default:
		g, err := top.geometry()
		if err != nil {
			return nil, fmt.Errorf("not GeoJSON: %w", err)
		}
		c.Features = []*geojson.Feature{geojson.NewFeature(g)}
	}
	c.Fields = fields.list
	fields.stringifyMixed(c.Features)
	return c, nil
}

// feature converts o, which must be a Feature.
func (o object) feature(fields *fieldSet) (*geojson.Feature, error) {
	if o.Type != "Feature" {
		return nil, fmt.Errorf("type %q, want Feature", o.Type)
	}
	if isNull(o.Geometry) {
		return nil, errors.New("no geometry")
	}
	var g object
	if err := json.Unmarshal(o.Geometry, &g); err != nil {
		return nil, fmt.Errorf("geometry: %w", err)
	}
	geom, err := g.geometry()
	if err != nil {
		return nil, err
	}
	f := geojson.NewFeature(geom)
	if len(o.ID) > 0 && (o.ID[0] == '"' || o.ID[0] == '-' || o.ID[0] >= '0' && o.ID[0] <= '9') {
		if f.ID, err = scalar(o.ID); err != nil {
			return nil, fmt.Errorf("id: %w", err)
		}
	}
	if isNull(o.Properties) {
		return f, nil
	}
	dec := json.NewDecoder(bytes.NewReader(o.Properties))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return nil, errors.New("properties is not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("properties: %w", err)
		}
		key, _ := tok.(string) // a key inside an object is always a string
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("properties: %w", err)
		}
		v, err := scalar(raw)
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", key, err)
		}
		if v != nil {
			f.Properties[key] = v
			fields.add(key, v)
		}
	}
	return f, nil
}

// isNull reports whether a member is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// scalar converts one valid JSON value to a property value: nil for null,
// the compact JSON text of an object or an array.
func scalar(raw json.RawMessage) (any, error) {
	switch raw[0] {
	case 'n':
		return nil, nil
	case 't', 'f':
		return raw[0] == 't', nil
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '{', '[':
		var b bytes.Buffer
		err := json.Compact(&b, raw)
		return b.String(), err
	}
	s := string(raw)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %s is out of range", s)
	}
	return f, nil
}

// geometry converts o, which must be one of the supported geometries.
func (o object) geometry() (orb.Geometry, error) {
	var err error
	var g orb.Geometry
	switch o.Type {
	case "Point":
		var c []float64
		if err = json.Unmarshal(o.Coordinates, &c); err == nil {
			g, err = position(c)
		}
	case "MultiPoint":
		var c [][]float64
		if err = json.Unmarshal(o.Coordinates, &c); err == nil {
			var ps []orb.Point
			ps, err = positions(c)
			g = orb.MultiPoint(ps)
		}
	case "LineString":
		var c [][]float64
		if err = json.Unmarshal(o.Coordinates, &c); err == nil {
			g, err = line(c)
		}
	case "MultiLineString":
		var c [][][]float64
		if err = json.Unmarshal(o.Coordinates, &c); err == nil {
			g, err = multiLine(c)
		}
	case "Polygon":
		var c [][][]float64
		if err = json.Unmarshal(o.Coordinates, &c); err == nil {
			g, err = polygon(c)
		}
	case "MultiPolygon":
		var c [][][][]float64
		if err = json.Unmarshal(o.Coordinates, &c); err == nil {
			mp := make(orb.MultiPolygon, len(c))
			for i := range c {
				if mp[i], err = polygon(c[i]); err != nil {
					err = fmt.Errorf("polygon %d: %w", i, err)
					break
				}
			}
			g = mp
		}
	case "GeometryCollection":
		return nil, errors.New("unsupported geometry type GeometryCollection")
	default:
		return nil, fmt.Errorf("type %q is not a GeoJSON FeatureCollection, Feature or geometry", o.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Type, err)
	}
	return g, nil
}

// position converts one GeoJSON position, dropping any altitude.
func position(c []float64) (orb.Point, error) {
	if len(c) < 2 {
		return orb.Point{}, fmt.Errorf("position %v has %d numbers, want 2 or more", c, len(c))
	}
	return orb.Point{c[0], c[1]}, nil
}

// positions converts an array of positions.
func positions(c [][]float64) ([]orb.Point, error) {
	ps := make([]orb.Point, len(c))
	for i := range c {
		var err error
		if ps[i], err = position(c[i]); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// line converts a LineString's coordinates.
func line(c [][]float64) (orb.LineString, error) {
	ps, err := positions(c)
	return orb.LineString(ps), err
}

// multiLine converts a MultiLineString's coordinates.
func multiLine(c [][][]float64) (orb.MultiLineString, error) {
	ls := make(orb.MultiLineString, len(c))
	for i := range c {
		var err error
		if ls[i], err = line(c[i]); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// polygon converts a Polygon's coordinates.
func polygon(c [][][]float64) (orb.Polygon, error) {
	ls, err := multiLine(c)
	p := make(orb.Polygon, len(ls))
	for i := range ls {
		p[i] = orb.Ring(ls[i])
	}
	return p, err
}

// fieldSet gathers the fields of GeoJSON properties as they are read.
type fieldSet struct {
	list  []Field
	index map[string]int
	mixed map[string]bool
}

// add records a value v of property name.
func (s *fieldSet) add(name string, v any) {
	t := "Number"
	switch v.(type) {
	case string:
		t = "String"
	case bool:
		t = "Boolean"
	}
	i, ok := s.index[name]
	if !ok {
		s.index[name] = len(s.list)
		s.list = append(s.list, Field{Name: name, Type: t})
	} else if s.list[i].Type != t {
		s.list[i].Type = "String"
		if s.mixed == nil {
			s.mixed = map[string]bool{}
		}
		s.mixed[name] = true
	}
}

// stringifyMixed makes every value of a property of mixed types its JSON
// text, as its String field type says.
func (s *fieldSet) stringifyMixed(fs []*geojson.Feature) {
	for _, f := range fs {
		for k, v := range f.Properties {
			if _, ok := v.(string); !ok && s.mixed[k] {
				b, _ := json.Marshal(v) // a bool, int64 or finite float64
				f.Properties[k] = string(b)
			}
		}
	}
}
