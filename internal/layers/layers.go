// Package layers reads the layers file: the operator's own tile layers
// (PostGIS tables and views, SQL functions, PMTiles archives, GeoJSON and
// FlatGeobuf files) and geofence sets (tables and files), each with its
// name, source and options.
//
// The file is YAML or JSON (JSON is YAML), read strictly: a field the file
// does not have, a name used twice, two sources for one layer, an inverted
// zoom range are errors naming the layer and what is wrong. What only the
// database can tell (that a table exists, that a column is a geometry) is
// checked when the layer is opened, by the package that serves it.
package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tileapi/tileapi/internal/param"
)

// Zoom bounds of every layer.
const (
	// MaxZoom is the highest zoom a layer may serve.
	MaxZoom = 22
	// DefaultMaxFeatures caps the features of one tile of a table or file
	// layer that names no cap.
	DefaultMaxFeatures = 10_000
)

// File is a layers file.
//
//	layers:
//	  - name: parcels
//	    table: public.parcels        # or function:, pmtiles:, file:
//	    geometry: geom               # default: the table's only geometry column
//	    id: parcel_id                # default: a one-column integer primary key
//	    properties: [owner, area_m2] # default: every other column
//	    minzoom: 10
//	    maxzoom: 22
//	    max_features: 5000
//	    filter: {column: area_m2, min_by_zoom: {10: 5000, 14: 0}}
//	    attribution: "© City of Example"
//	geofences:
//	  - name: stores
//	    table: public.stores
//	    properties: [name, opening_hours]
type File struct {
	Layers    []Layer `yaml:"layers"`
	Geofences []Set   `yaml:"geofences"`
}

// Source kinds, as Layer.Kind and Set.Kind report them.
const (
	Table    = "table"
	Function = "function"
	PMTiles  = "pmtiles"
	FileKind = "file"
)

// Layer is one tile layer: exactly one of Table, Function, PMTiles and
// File is its source.
type Layer struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Attribution string `yaml:"attribution"`
	// MinZoom and MaxZoom bound the zooms served; absent, 0 and 22 (a
	// PMTiles archive's own range).
	MinZoom *int `yaml:"minzoom"`
	MaxZoom *int `yaml:"maxzoom"`
	// MaxFeatures caps the features of one tile (table and file layers);
	// DefaultMaxFeatures if absent.
	MaxFeatures int `yaml:"max_features"`

	// Table is a table or view, schema-qualified ("public.parcels"); an
	// unqualified name is in the role's search_path.
	Table string `yaml:"table"`
	// Function is a SQL function (schema-qualified) of (z integer,
	// x integer, y integer, params jsonb) returning bytea, an MVT.
	Function string `yaml:"function"`
	// PMTiles is the path of a PMTiles v3 archive, or its http(s) URL.
	PMTiles string `yaml:"pmtiles"`
	// File is the path of a GeoJSON or FlatGeobuf file, in WGS84, served
	// from memory.
	File string `yaml:"file"`

	// Geometry, ID and Properties are columns of Table (Geometry and
	// Properties of File too: property names); see File.
	Geometry   string   `yaml:"geometry"`
	ID         string   `yaml:"id"`
	Properties []string `yaml:"properties"`
	// Filter thins the features of a table layer by zoom.
	Filter *Filter `yaml:"filter"`

	// Params are the query parameters a function layer takes from the
	// request, validated before it runs and passed in its params argument.
	Params []Param `yaml:"params"`
}

// Filter keeps, at zoom z, the rows whose Column is at least the value of
// MinByZoom at the highest zoom not above z (below the lowest zoom given,
// that zoom's value), largest first: the places layer's thinning by
// population.
type Filter struct {
	Column    string          `yaml:"column"`
	MinByZoom map[int]float64 `yaml:"min_by_zoom"`
}

// Min returns the least value of Column drawn at zoom z, and false when
// there is no filter.
func (f *Filter) Min(z int) (float64, bool) {
	if f == nil {
		return 0, false
	}
	best, found := math.Inf(1), false
	for _, fz := range f.zooms() {
		if fz > z {
			break
		}
		best, found = f.MinByZoom[fz], true
	}
	if !found {
		// Below the lowest zoom given, the lowest zoom's threshold.
		zs := f.zooms()
		return f.MinByZoom[zs[0]], true
	}
	return best, true
}

func (f *Filter) zooms() []int {
	zs := make([]int, 0, len(f.MinByZoom))
	for z := range f.MinByZoom {
		zs = append(zs, z)
	}
	sort.Ints(zs)
	return zs
}

// Param types.
const (
	Integer = "integer"
	Number  = "number"
	String  = "string"
	Boolean = "boolean"
)

// Param is one query parameter of a function layer.
type Param struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Type is integer, number, string or boolean.
	Type string `yaml:"type"`
	// Required refuses a request without it; otherwise Default, if any,
	// stands in for it, or it is left out of params.
	Required bool `yaml:"required"`
	Default  any  `yaml:"default"`
	// Min and Max bound a number or integer.
	Min *float64 `yaml:"min"`
	Max *float64 `yaml:"max"`
	// Enum lists the values a string may take; MaxLength caps one that
	// has no enum (default 256 bytes).
	Enum      []string `yaml:"enum"`
	MaxLength int      `yaml:"max_length"`
}

// Set is one geofence set: a table (or file) whose features within a
// radius of a point (/v1/geofence/{set}/within) or containing a point
// (/v1/geofence/{set}/contains, polygons only) are asked for.
type Set struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Table       string   `yaml:"table"`
	File        string   `yaml:"file"`
	Geometry    string   `yaml:"geometry"`
	ID          string   `yaml:"id"`
	Properties  []string `yaml:"properties"`
}

// Kind returns the layer's source kind: Table, Function, PMTiles or
// FileKind.
func (l Layer) Kind() string {
	switch {
	case l.Table != "":
		return Table
	case l.Function != "":
		return Function
	case l.PMTiles != "":
		return PMTiles
	}
	return FileKind
}

// Zooms returns the layer's zoom range, defaults filled in: 0 to MaxZoom.
func (l Layer) Zooms() (minZoom, maxZoom int) {
	minZoom, maxZoom = 0, MaxZoom
	if l.MinZoom != nil {
		minZoom = *l.MinZoom
	}
	if l.MaxZoom != nil {
		maxZoom = *l.MaxZoom
	}
	return minZoom, maxZoom
}

// Features returns the layer's cap on features per tile.
func (l Layer) Features() int {
	if l.MaxFeatures == 0 {
		return DefaultMaxFeatures
	}
	return l.MaxFeatures
}

// Kind returns the set's source kind: Table or FileKind.
func (s Set) Kind() string {
	if s.Table != "" {
		return Table
	}
	return FileKind
}

// Load reads and checks the layers file at path.
func Load(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("layers: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return File{}, fmt.Errorf("layers: %s: %w", path, err)
	}
	return f, nil
}

// Parse reads and checks a layers file in YAML or JSON.
func Parse(b []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // a misspelt field would silently take its default
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return File{}, err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return File{}, errors.New("more than one document")
	}
	return f, f.Check(nil)
}

// namePattern is what a layer or set name may be: it is a path segment
// of the API, an MVT layer name and a key of the plans' prices.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Check reports the first thing wrong in f that can be told without
// opening a source, naming the layer or set. reserved are names already
// taken (the bundled layers and sets, where served beside f).
func (f File) Check(reserved []string) error {
	seen := map[string]bool{}
	for _, n := range reserved {
		seen[n] = true
	}
	for i, l := range f.Layers {
		if err := checkName("layer", i, l.Name, seen); err != nil {
			return err
		}
		if err := l.check(); err != nil {
			return fmt.Errorf("layer %q: %w", l.Name, err)
		}
	}
	seen = map[string]bool{}
	for _, n := range reserved {
		seen[n] = true
	}
	for i, s := range f.Geofences {
		if err := checkName("geofence set", i, s.Name, seen); err != nil {
			return err
		}
		if err := s.check(); err != nil {
			return fmt.Errorf("geofence set %q: %w", s.Name, err)
		}
	}
	return nil
}

func checkName(what string, i int, name string, seen map[string]bool) error {
	switch {
	case name == "":
		return fmt.Errorf("%s %d has no name", what, i+1)
	case !namePattern.MatchString(name):
		return fmt.Errorf("%s %q: name must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit", what, name)
	case seen[name]:
		return fmt.Errorf("%s %q: the name is used twice", what, name)
	}
	seen[name] = true
	return nil
}

func (l Layer) check() error {
	n := 0
	for _, s := range []string{l.Table, l.Function, l.PMTiles, l.File} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return errors.New("needs exactly one source: table, function, pmtiles or file")
	}
	minZoom, maxZoom := l.Zooms()
	switch {
	case minZoom < 0 || minZoom > MaxZoom:
		return fmt.Errorf("minzoom %d must be in [0, %d]", minZoom, MaxZoom)
	case maxZoom < 0 || maxZoom > MaxZoom:
		return fmt.Errorf("maxzoom %d must be in [0, %d]", maxZoom, MaxZoom)
	case minZoom > maxZoom:
		return fmt.Errorf("the zoom range is inverted: minzoom %d is above maxzoom %d", minZoom, maxZoom)
	case l.MaxFeatures < 0:
		return fmt.Errorf("max_features %d must be positive (or absent for %d)", l.MaxFeatures, DefaultMaxFeatures)
	}
	kind := l.Kind()
	if kind != Table && kind != FileKind {
		if l.Geometry != "" || l.ID != "" || l.Properties != nil || l.Filter != nil || l.MaxFeatures != 0 {
			return fmt.Errorf("geometry, id, properties, filter and max_features are options of table and file layers, not of a %s layer", kind)
		}
	}
	if kind != Function && l.Params != nil {
		return fmt.Errorf("params are options of function layers, not of a %s layer", kind)
	}
	if kind == FileKind && (l.ID != "" || l.Geometry != "") {
		return errors.New("a file layer takes its geometry and id from the file: geometry and id are options of table layers")
	}
	if err := checkColumns(l.Geometry, l.ID, l.Properties); err != nil {
		return err
	}
	if f := l.Filter; f != nil {
		if kind != Table {
			return errors.New("filter is an option of table layers")
		}
		if f.Column == "" || len(f.MinByZoom) == 0 {
			return errors.New("filter needs a column and min_by_zoom")
		}
		for z, v := range f.MinByZoom {
			if z < 0 || z > MaxZoom || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("filter: min_by_zoom: zoom %d must be in [0, %d] and its value finite", z, MaxZoom)
			}
		}
	}
	if kind == PMTiles && (strings.HasPrefix(l.PMTiles, "s3://") || strings.HasPrefix(l.PMTiles, "gs://")) {
		return fmt.Errorf("pmtiles %q: only a path or an http(s) URL is read; serve a bucket over HTTPS", l.PMTiles)
	}
	return checkParams(l.Params)
}

func (s Set) check() error {
	if (s.Table == "") == (s.File == "") {
		return errors.New("needs exactly one source: table or file")
	}
	if s.File != "" && (s.ID != "" || s.Geometry != "") {
		return errors.New("a file set takes its geometry and id from the file: geometry and id are options of table sets")
	}
	return checkColumns(s.Geometry, s.ID, s.Properties)
}

func checkColumns(geometry, id string, properties []string) error {
	seen := map[string]bool{}
	for _, p := range properties {
		switch {
		case p == "":
			return errors.New("properties: a property has no name")
		case seen[p]:
			return fmt.Errorf("properties: %q is listed twice", p)
		case p == geometry && geometry != "":
			return fmt.Errorf("properties: %q is the geometry column", p)
		}
		seen[p] = true
	}
	return nil
}

// maxStringLength is the longest string parameter without an enum or a
// max_length of its own.
const maxStringLength = 256

func checkParams(ps []Param) error {
	seen := map[string]bool{}
	for _, p := range ps {
		switch {
		case !namePattern.MatchString(p.Name):
			return fmt.Errorf("params: %q: name must be 1 to 63 of a-z, 0-9, _ and -", p.Name)
		case seen[p.Name]:
			return fmt.Errorf("params: %q is declared twice", p.Name)
		case !slices.Contains([]string{Integer, Number, String, Boolean}, p.Type):
			return fmt.Errorf("params: %q: type %q must be integer, number, string or boolean", p.Name, p.Type)
		case (p.Min != nil || p.Max != nil) && p.Type != Integer && p.Type != Number:
			return fmt.Errorf("params: %q: min and max bound numbers, not a %s", p.Name, p.Type)
		case p.Enum != nil && p.Type != String:
			return fmt.Errorf("params: %q: enum lists strings, not a %s", p.Name, p.Type)
		case p.Min != nil && p.Max != nil && *p.Min > *p.Max:
			return fmt.Errorf("params: %q: min %g is above max %g", p.Name, *p.Min, *p.Max)
		case p.MaxLength < 0:
			return fmt.Errorf("params: %q: max_length must be positive", p.Name)
		}
		seen[p.Name] = true
		if p.Default != nil {
			if _, err := p.ParseDefault(); err != nil { // a *param.Error naming p
				return fmt.Errorf("params: default: %w", err)
			}
		}
	}
	return nil
}

// Parse reads the text of the parameter from a request and returns its
// value (int64, float64, string or bool), or a *param.Error naming the
// parameter and saying what is wrong. A number or integer is read as
// param.Float reads one, in JSON's number grammar (RFC 8259 section 6),
// as every number of the API is: "+1", ".5", "5.", "01", "1_0", "0x1p1"
// and "NaN" are refused. An integer is such a number with no fractional
// part ("12", "-3", and also "1e2", as JSON Schema's integer), of at most
// 2^53 in magnitude so that it is exact in JSON.
func (p Param) Parse(s string) (any, error) {
	switch p.Type {
	case Integer, Number:
		v, err := param.Float(p.Name, s)
		if err != nil {
			return nil, err
		}
		if p.Type == Integer && v != math.Trunc(v) {
			return nil, param.Invalid(p.Name, "must be an integer")
		}
		if (p.Min != nil && v < *p.Min) || (p.Max != nil && v > *p.Max) {
			return nil, param.Invalid(p.Name, "must be in [%s, %s]", bound(p.Min, "-inf"), bound(p.Max, "inf"))
		}
		if p.Type == Integer {
			if math.Abs(v) > 1<<53 {
				return nil, param.Invalid(p.Name, "must be an integer of at most 2^53 in magnitude")
			}
			return int64(v), nil
		}
		return v, nil
	case Boolean:
		switch s {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, param.Invalid(p.Name, "must be true or false")
	}
	if p.Enum != nil {
		if !slices.Contains(p.Enum, s) {
			return nil, param.Invalid(p.Name, "must be one of %s", strings.Join(p.Enum, ", "))
		}
		return s, nil
	}
	maxLen := p.MaxLength
	if maxLen == 0 {
		maxLen = maxStringLength
	}
	if len(s) > maxLen {
		return nil, param.Invalid(p.Name, "must be at most %d bytes", maxLen)
	}
	return s, nil
}

// ParseDefault returns the parameter's default as Parse would read it
// from a request: a string as its text, anything else as JSON writes it.
func (p Param) ParseDefault() (any, error) {
	text, ok := p.Default.(string)
	if !ok {
		b, err := json.Marshal(p.Default)
		if err != nil {
			return nil, param.Invalid(p.Name, "must be a JSON scalar: %v", err)
		}
		text = string(b)
	}
	return p.Parse(text)
}

func bound(v *float64, none string) string {
	if v == nil {
		return none
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}
