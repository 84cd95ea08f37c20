// Package dataset is the spatial data bundled with tileapi: GeoNames populated
// places (points) and Natural Earth countries and US Census counties
// (polygons, called fences), embedded gzipped and parsed into typed values.
//
// Identifiers are the ones the API exposes: a place by its GeoNames
// geonameid, a county by its 5-digit FIPS code read as an integer, and a
// country by an id of our own (see Fence). All coordinates are lon/lat in
// EPSG:4326.
package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/tileapi/tileapi/internal/winding"
)

// Attribution credits the bundled data; it goes wherever the data is shown.
const Attribution = `Places: <a href="https://www.geonames.org/">GeoNames</a> (CC BY 4.0); ` +
	`countries: <a href="https://www.naturalearthdata.com/">Natural Earth</a>; ` +
	`counties: <a href="https://www.census.gov/">US Census Bureau</a>`

// The bundled files, as copied from the shared data folder.
const (
	placesFile    = "data/cities1000.csv.gz"
	countriesFile = "data/countries-50m.geojson.gz"
	countiesFile  = "data/us-counties-10m.geojson.gz"
)

//go:embed data/*.gz
var bundledFiles embed.FS

// Place is a populated place.
type Place struct {
	ID          int64  // GeoNames geonameid
	Name        string // name as in GeoNames
	Country     string // ISO 3166-1 alpha-2 code
	AdminCode   string // first-level administrative division code
	FeatureCode string // GeoNames feature code: PPL, PPLA, PPLC, ...
	Population  int64
	Point       orb.Point // lon, lat
}

// Properties returns the place's attributes as GeoJSON (and MVT) properties.
func (p Place) Properties() geojson.Properties {
	return geojson.Properties{
		"name":         p.Name,
		"country":      p.Country,
		"admin_code":   p.AdminCode,
		"feature_code": p.FeatureCode,
		"population":   p.Population,
	}
}

// Feature returns the place as a GeoJSON point feature whose id is the
// geonameid.
func (p Place) Feature() *geojson.Feature {
	f := geojson.NewFeature(p.Point)
	f.ID = p.ID
	f.Properties = p.Properties()
	return f
}

// Kind is the kind of a fence.
type Kind string

// The kinds of fences in the bundled dataset.
const (
	Country Kind = "country"
	County  Kind = "county"
)

// Fence is a polygon area: a country or a county.
//
// A county's ID is its FIPS code read as an integer (06037 is 6037). A
// country's ID is its 1-based rank in the byte order of the (unique) country
// names, because the dataset's ISO 3166-1 numeric codes are missing for five
// countries and repeated once; the ISO code is kept in Code.
type Fence struct {
	ID       int64
	Kind     Kind
	Name     string
	Code     string           // ISO 3166-1 numeric for a country ("" when the dataset has none), 5-digit FIPS for a county
	Geometry orb.MultiPolygon // nil where a query did not ask for it
}

// Properties returns the fence's attributes as GeoJSON (and MVT) properties;
// code is left out where it is empty.
func (f Fence) Properties() geojson.Properties {
	p := geojson.Properties{"name": f.Name, "kind": string(f.Kind)}
	if f.Code != "" {
		p["code"] = f.Code
	}
	return p
}

// Feature returns the fence as a GeoJSON feature whose id is the fence's ID;
// its geometry is null where Geometry is nil.
func (f Fence) Feature() *geojson.Feature {
	feature := geojson.NewFeature(nil)
	if f.Geometry != nil {
		feature.Geometry = f.Geometry
	}
	feature.ID = f.ID
	feature.Properties = f.Properties()
	return feature
}

// Dataset is the whole bundled dataset.
type Dataset struct {
	Places []Place // in file order
	Fences []Fence // countries by ID, then counties by ID
}

// Load parses the bundled dataset. It takes about a second.
func Load() (*Dataset, error) {
	return LoadFrom(Sources{})
}

// Source is a file that replaces one of the bundled dataset, in the same
// format (see ReadPlaces and ReadFences), gzipped or not.
type Source struct {
	Name string // for error messages, such as the file's path
	R    io.Reader
}

// Sources are the files that replace those of the bundled dataset; where one
// is nil, the bundled file is used.
type Sources struct {
	Places, Countries, Counties *Source
}

// LoadFrom parses the bundled dataset with the files of s in place of the
// bundled ones, the three files at once.
func LoadFrom(s Sources) (*Dataset, error) {
	var (
		d                   Dataset
		countries, counties []Fence
	)
	files := []struct {
		bundled string
		src     *Source
		parse   func(io.Reader) error
	}{
		{placesFile, s.Places, func(r io.Reader) (err error) { d.Places, err = ReadPlaces(r); return err }},
		{countriesFile, s.Countries, func(r io.Reader) (err error) { countries, err = ReadFences(r, Country); return err }},
		{countiesFile, s.Counties, func(r io.Reader) (err error) { counties, err = ReadFences(r, County); return err }},
	}
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() { errs[i] = parseSource(f.bundled, f.src, f.parse) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	d.Fences = append(countries, counties...)
	return &d, nil
}

// parseSource parses src, or the bundled file where src is nil, through a
// gzip reader where it starts with gzip's magic number.
func parseSource(bundled string, src *Source, parse func(io.Reader) error) error {
	name := bundled
	var r io.Reader
	if src != nil {
		name, r = src.Name, src.R
	} else {
		f, err := bundledFiles.Open(bundled)
		if err != nil {
			return fmt.Errorf("dataset: %w", err)
		}
		defer f.Close()
		r = f
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("dataset: %s: %w", name, err)
		}
		r = zr
	} else {
		r = br
	}
	if err := parse(r); err != nil {
		return fmt.Errorf("dataset: %s: %w", name, err)
	}
	return nil
}

// placesHeader is the header ReadPlaces expects.
var placesHeader = []string{"geonameid", "name", "country", "admin_code", "feature_code", "population", "lon", "lat"}

// ReadPlaces parses places from CSV with the header
// geonameid,name,country,admin_code,feature_code,population,lon,lat.
func ReadPlaces(r io.Reader) ([]Place, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if !slices.Equal(header, placesHeader) {
		return nil, fmt.Errorf("header is %q, want %q", header, placesHeader)
	}
	var places []Place
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return places, nil
		}
		if err != nil {
			return nil, err
		}
		p, err := parsePlace(rec)
		if err != nil {
			line, _ := cr.FieldPos(0)
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		places = append(places, p)
	}
}

func parsePlace(rec []string) (Place, error) {
	p := Place{Name: rec[1], Country: rec[2], AdminCode: rec[3], FeatureCode: rec[4]}
	var err error
	if p.ID, err = strconv.ParseInt(rec[0], 10, 64); err != nil {
		return p, fmt.Errorf("geonameid: %w", err)
	}
	if p.Population, err = strconv.ParseInt(rec[5], 10, 64); err != nil {
		return p, fmt.Errorf("population: %w", err)
	}
	if p.Point[0], err = strconv.ParseFloat(rec[6], 64); err != nil {
		return p, fmt.Errorf("lon: %w", err)
	}
	if p.Point[1], err = strconv.ParseFloat(rec[7], 64); err != nil {
		return p, fmt.Errorf("lat: %w", err)
	}
	return p, nil
}

// ReadFences parses a GeoJSON FeatureCollection of Polygon and MultiPolygon
// features with a "name" property into fences of the given kind, sorted by
// ID. Polygons that cross the antimeridian are cut into a part on each side;
// rings are wound as RFC 7946 wants (exteriors counter-clockwise, holes
// clockwise) and those of no area are dropped.
// For counties the feature id is the FIPS code; for countries it is the
// ISO code, kept in Code, and the ID is given by name (see Fence).
func ReadFences(r io.Reader, kind Kind) ([]Fence, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	fc, err := geojson.UnmarshalFeatureCollection(data)
	if err != nil {
		return nil, err
	}
	fences := make([]Fence, 0, len(fc.Features))
	for i, f := range fc.Features {
		fence, err := parseFence(f, kind)
		if err != nil {
			return nil, fmt.Errorf("feature %d: %w", i, err)
		}
		fences = append(fences, fence)
	}
	if kind == Country {
		slices.SortFunc(fences, func(a, b Fence) int { return strings.Compare(a.Name, b.Name) })
		for i := range fences {
			if i > 0 && fences[i].Name == fences[i-1].Name {
				return nil, fmt.Errorf("country name %q appears twice", fences[i].Name)
			}
			fences[i].ID = int64(i + 1)
		}
	}
	slices.SortFunc(fences, func(a, b Fence) int { return int(a.ID - b.ID) })
	for i := 1; i < len(fences); i++ {
		if fences[i].ID == fences[i-1].ID {
			return nil, fmt.Errorf("%s id %d appears twice", kind, fences[i].ID)
		}
	}
	return fences, nil
}

func parseFence(f *geojson.Feature, kind Kind) (Fence, error) {
	fence := Fence{Kind: kind, Name: f.Properties.MustString("name", "")}
	if fence.Name == "" {
		return fence, errors.New("no name")
	}
	// Wound as RFC 7946 wants, without the rings of no area that are in
	// the source (a county's ring of one point repeated, a spike out and
	// back) and that the antimeridian cut makes (a sliver along the map's
	// edge beside Antarctica).
	switch g := f.Geometry.(type) {
	case orb.Polygon:
		fence.Geometry = winding.MultiPolygon(splitAntimeridian(orb.MultiPolygon{g}))
	case orb.MultiPolygon:
		fence.Geometry = winding.MultiPolygon(splitAntimeridian(g))
	default:
		return fence, fmt.Errorf("%s: geometry is %T, want a polygon", fence.Name, f.Geometry)
	}
	if len(fence.Geometry) == 0 {
		// No polygon has an area (Falls Church, Virginia, quantized into a
		// line in the counties file): the fence is kept, with an empty
		// geometry, and contains no point.
		fence.Geometry = orb.MultiPolygon{}
	}
	code, _ := f.ID.(string)
	fence.Code = code
	if kind == County {
		id, err := strconv.ParseInt(code, 10, 64)
		if err != nil || len(code) != 5 {
			return fence, fmt.Errorf("%s: FIPS code %q is not 5 digits", fence.Name, code)
		}
		fence.ID = id
	}
	return fence, nil
}
