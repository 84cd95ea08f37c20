package tiles

import (
	"errors"
	"net/url"
	"regexp"
	"strconv"
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
		{"kind=rain&scale=0x1p1", "", "scale"},
		{"kind=rain&scale=%2B1", "", "scale"},
		{"kind=rain&scale=.5", "", "scale"},
		{"kind=rain&year=01", "", "year"},
		{"kind=rain&year=1_0", "", "year"},
		{"kind=rain&year=1e1&scale=-2.5E-1", `{"kind":"rain","scale":-0.25,"year":10}`, ""},
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

// jsonNumber is JSON's number grammar (RFC 8259 section 6), written out
// here rather than taken from the parser it checks.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzParseParams: any query is parameters or a *param.Error naming one
// the layer declares; never a panic, and parsed parameters are JSON of the
// declared names only. A number parameter (year, scale) is held to JSON's
// number grammar: a text outside it is refused naming the parameter, and
// one that was accepted is in it and has the value it reads as.
func FuzzParseParams(f *testing.F) {
	f.Add("kind=rain&year=12")
	f.Add("kind=snow&scale=1e308&dark=false")
	f.Add("kind=%00&year=-0")
	f.Add("kind=rain&scale=0x1p1")
	f.Add("kind=rain&year=1e1&scale=.5")
	f.Add("kind=rain&scale=%2B1")
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
			if text := q.Get(fe.Field); (fe.Field == "year" || fe.Field == "scale") && len(q[fe.Field]) == 1 &&
				jsonNumber.MatchString(text) == strings.Contains(fe.Reason, "as JSON writes one") {
				t.Fatalf("%q: %s=%q refused with %q: JSON's grammar says otherwise", query, fe.Field, text, fe.Reason)
			}
			return
		}
		for name := range p.Values() {
			if !strings.Contains("year kind scale dark", name) {
				t.Fatalf("%q: parameter %q is not declared", query, name)
			}
		}
		for _, name := range []string{"year", "scale"} {
			text, given := q[name]
			if !given {
				continue
			}
			want, err := strconv.ParseFloat(text[0], 64)
			if !jsonNumber.MatchString(text[0]) || err != nil {
				t.Fatalf("%q: %s=%q is not a number in JSON's grammar, yet accepted", query, name, text[0])
			}
			if got := p.Values()[name]; got != want && got != int64(want) {
				t.Fatalf("%q: %s=%q read as %v, want %v", query, name, text[0], got, want)
			}
		}
		if len(p.JSON()) == 0 {
			t.Fatal("no JSON")
		}
	})
}
