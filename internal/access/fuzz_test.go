package access

import (
	"errors"
	"slices"
	"testing"

	"github.com/tileapi/tileapi/internal/param"
)

// FuzzParse: any input is restrictions or a *param.Error, never a panic,
// and what parses writes JSON that parses to the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"origins":["https://*.example.com","http://localhost:8080"],"allow_no_origin":true}`,
		`{"networks":["10.0.0.0/8","2001:db8::/32"],"routes":["tiles"],"layers":["a"],"sets":["b"]}`,
		`{"origins":["https://*."]}`, `{"x":1}`, `null`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			var fe *param.Error
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("Parse(%q) = %v, want a *param.Error naming a field", b, err)
			}
			return
		}
		again, err := Parse(r.JSON())
		if err != nil {
			t.Fatalf("Parse(JSON of %q) = %v", b, err)
		}
		if string(again.JSON()) != string(r.JSON()) {
			t.Fatalf("JSON %s parsed to %s", r.JSON(), again.JSON())
		}
	})
}

// FuzzOrigin: matching any Origin or Referer never panics, and an origin
// admitted by a pattern is admitted again in the form String writes.
func FuzzOrigin(f *testing.F) {
	for _, s := range [][2]string{{"https://*.example.com", "https://a.example.com"}, {"http://localhost:8080", "http://LOCALHOST:8080"},
		{"https://[::1]", "https://[0::1]:443"}, {"https://a.example.com", ""}} {
		f.Add(s[0], s[1], "https://a.example.com/x")
	}
	f.Fuzz(func(t *testing.T, pattern, originHeader, referer string) {
		p, err := parseOrigin(pattern, true)
		if err != nil {
			return
		}
		if again, err := parseOrigin(p.String(), true); err != nil || again != p {
			t.Fatalf("pattern %q wrote %q, which parses to %v, %v", pattern, p.String(), again, err)
		}
		if o, err := parseOrigin(originHeader, false); err == nil {
			if p.matches(o) != slices.Contains(OriginCandidates(originHeader), p.String()) {
				t.Fatalf("%q matches %q: %v, but its candidates are %q", pattern, originHeader, p.matches(o), OriginCandidates(originHeader))
			}
		}
		r := Restrictions{Origins: []string{pattern}, origins: []origin{p}}
		if r.CheckOrigin(originHeader, referer) == nil && originHeader != "" {
			o, err := parseOrigin(originHeader, false)
			if err != nil || !r.AllowsOrigin(o.String()) {
				t.Fatalf("%q admitted %q but not as %q (%v)", pattern, originHeader, o.String(), err)
			}
		}
	})
}
