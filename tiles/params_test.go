package tiles

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/param"
)

func paramsLayer() Layer {
	lo, hi := 1.0, 100.0
	return Layer{Name: "f", Params: []layers.Param{
		{Name: "year", Type: layers.Integer, Min: &lo, Max: &hi, Default: 7},
		{Name: "kind", Type: layers.String, Enum: []string{"rain", "snow"}, Required: true},
		{Name: "scale", Type: layers.Number},
		{Name: "dark", Type: layers.Boolean},
	}}
}

func TestParseParams(t *testing.T) {
	l := paramsLayer()
	for _, tc := range []struct {
		query, json, field string
	}{
		{"kind=rain", `{"kind":"rain","year":7}`, ""},
		{"kind=snow&year=12&scale=0.5&dark=true&cachebuster=9", `{"dark":true,"kind":"snow","scale":0.5,"year":12}`, ""},
		{"year=12", "", "kind"},
		{"kind=hail", "", "kind"},
		{"kind=rain&year=101", "", "year"},
		{"kind=rain&year=1.5", "", "year"},
		{"kind=rain&kind=snow", "", "kind"},
		{"kind=rain&dark=1", "", "dark"},
		{"kind=rain&scale=NaN", "", "scale"},
	} {
		q, _ := url.ParseQuery(tc.query)
		p, err := l.ParseParams(q)
		var fe *param.Error
		switch {
		case tc.field == "" && (err != nil || string(p.JSON()) != tc.json || p.Key() != tc.json):
			t.Errorf("%s: %s %v, want %s", tc.query, p.JSON(), err, tc.json)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: error %v, want one for %s", tc.query, err, tc.field)
		}
	}
	if p, err := (Layer{Name: "plain"}).ParseParams(url.Values{"year": {"x"}}); err != nil || p.Key() != "" || string(p.JSON()) != "{}" {
		t.Errorf("a layer without parameters: %q %v", p.Key(), err)
	}
}

// FuzzParseParams: any query is parameters or a *param.Error naming one
// the layer declares; never a panic, and parsed parameters are JSON of the
// declared names only.
func FuzzParseParams(f *testing.F) {
	f.Add("kind=rain&year=12")
	f.Add("kind=snow&scale=1e308&dark=false")
	f.Add("kind=%00&year=-0")
	l := paramsLayer()
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		p, err := l.ParseParams(q)
		if err != nil {
			var fe *param.Error
			if !errors.As(err, &fe) || !strings.Contains("year kind scale dark", fe.Field) {
				t.Fatalf("%q: error %v, want a *param.Error of a declared parameter", query, err)
			}
			return
		}
		for name := range p.Values() {
			if !strings.Contains("year kind scale dark", name) {
				t.Fatalf("%q: parameter %q is not declared", query, name)
			}
		}
		if len(p.JSON()) == 0 {
			t.Fatal("no JSON")
		}
	})
}
