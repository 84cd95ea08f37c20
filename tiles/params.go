package tiles

import (
	"encoding/json"
	"net/url"
	"slices"

	"github.com/tileapi/tileapi/internal/param"
)

// Params are the validated query parameters of a request for a function
// layer's tile: the parameters the layer declares, each parsed to its type
// (int64, float64, string or bool), defaults filled in.
type Params struct {
	values map[string]any
}

// Values returns the parameters by name; nil when there are none.
func (p Params) Values() map[string]any { return p.values }

// JSON returns the parameters as a JSON object, keys sorted: the params
// argument of a function layer, and part of a cached tile's key.
func (p Params) JSON() []byte {
	if len(p.values) == 0 {
		return []byte("{}")
	}
	b, err := json.Marshal(p.values) // maps marshal with sorted keys
	if err != nil {
		panic("tiles: params of JSON scalars did not marshal: " + err.Error())
	}
	return b
}

// Key returns the parameters as text for a cache key: "" when there are
// none, so that a layer without parameters keeps its keys.
func (p Params) Key() string {
	if len(p.values) == 0 {
		return ""
	}
	return string(p.JSON())
}

// ParseParams reads the parameters l declares from a request's query; a
// parameter it does not declare is ignored (a map client's cache buster,
// the API key). A declared one that is invalid, given twice, or required
// and missing is a *param.Error naming it; numbers are read as
// layers.Param.Parse reads them, in JSON's number grammar.
func (l Layer) ParseParams(q url.Values) (Params, error) {
	if len(l.Params) == 0 {
		return Params{}, nil
	}
	vs := make(map[string]any, len(l.Params))
	for _, p := range l.Params {
		texts, given := q[p.Name]
		switch {
		case len(texts) > 1:
			return Params{}, param.Invalid(p.Name, "is given %d times; give it once", len(texts))
		case !given && p.Required:
			return Params{}, param.Invalid(p.Name, "is required by layer %s", l.Name)
		case !given && p.Default != nil:
			v, err := p.ParseDefault()
			if err != nil { // checked when the layers file was read
				return Params{}, err
			}
			vs[p.Name] = v
		case given:
			v, err := p.Parse(texts[0]) // a *param.Error naming p
			if err != nil {
				return Params{}, err
			}
			vs[p.Name] = v
		}
	}
	return Params{values: vs}, nil
}

// ParamNames returns the names of the parameters l declares, sorted.
func (l Layer) ParamNames() []string {
	names := make([]string, len(l.Params))
	for i, p := range l.Params {
		names[i] = p.Name
	}
	slices.Sort(names)
	return names
}
