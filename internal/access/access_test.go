package access

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/internal/param"
)

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		in, field, mention string
	}{
		{`{"origin": ["https://a.example"]}`, "restrictions", "origin"},
		{`{"origins": "https://a.example"}`, "restrictions", "origins"},
		{`{"origins": ["https://*."]}`, "origins[0]", "https://*."},
		{`{"origins": ["https://*.com"]}`, "origins[0]", "*.com"},
		{`{"origins": ["*.example.com"]}`, "origins[0]", "*.example.com"},
		{`{"origins": ["https://a.example.com", "https://a.example.com/maps"]}`, "origins[1]", "/maps"},
		{`{"origins": ["https://a.example.com/"]}`, "origins[0]", "a.example.com/"},
		{`{"origins": ["https://a.*.example.com"]}`, "origins[0]", "a.*.example.com"},
		{`{"origins": ["https://*.*.example.com"]}`, "origins[0]", "*.*"},
		{`{"origins": ["https://user@a.example.com"]}`, "origins[0]", "user@"},
		{`{"origins": ["https://a.example.com:0"]}`, "origins[0]", ":0"},
		{`{"origins": ["https://a.example.com:99999"]}`, "origins[0]", "99999"},
		{`{"origins": ["https://a.example.com:"]}`, "origins[0]", "a.example.com:"},
		{`{"origins": ["https://[::1"]}`, "origins[0]", "[::1"},
		{`{"origins": ["ftp2+x://a.example.com"]}`, "origins[0]", "ftp2+x"},
		{`{"origins": ["https://"]}`, "origins[0]", "https://"},
		{`{"origins": ["null"]}`, "origins[0]", "null"},
		{`{"networks": ["10.0.0.0/33"]}`, "networks[0]", "10.0.0.0/33"},
		{`{"networks": ["10.0.0.1"]}`, "networks[0]", "10.0.0.1"},
		{`{"routes": ["tiles", "tile"]}`, "routes[1]", `"tile"`},
		{`{"layers": [""]}`, "layers[0]", `""`},
		{`{"sets": [" "]}`, "sets[0]", `" "`},
		{`{"allow_no_origin": true}`, "allow_no_origin", "origins"},
		{`{} {}`, "restrictions", "one"},
		{`[]`, "restrictions", "array"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			var fe *param.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v, want a *param.Error", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Error(), tc.mention) {
				t.Errorf("Parse = field %q, %q; want field %q mentioning %q", fe.Field, fe.Error(), tc.field, tc.mention)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for _, in := range []string{``, `null`, `{}`, ` {"origins": []} `,
		`{"origins": ["https://app.example.com", "https://*.example.com", "http://localhost:8080", "http://127.0.0.1:3000", "https://[2001:db8::1]:8443", "capacitor://localhost:1"], "allow_no_origin": true,
		  "networks": ["203.0.113.0/24", "2001:db8::/32", "198.51.100.7/32"],
		  "routes": ["tiles","tilejson","catalog","within","contains","sets","quota","tokens"], "layers": ["places"], "sets": ["places"]}`} {
		if _, err := Parse([]byte(in)); err != nil {
			t.Errorf("Parse(%s) = %v", in, err)
		}
	}
}

func TestJSONRoundTrips(t *testing.T) {
	in := `{"origins":["https://*.example.com"],"allow_no_origin":true,"networks":["10.0.0.0/8"],"routes":["tiles"],"layers":["places"],"sets":["boundaries"]}`
	r, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.JSON()); got != in {
		t.Errorf("JSON = %s, want %s", got, in)
	}
	if r, _ := Parse([]byte(`{"origins": []}`)); r.JSON() != nil || !r.IsZero() {
		t.Errorf("empty restrictions: JSON %s, IsZero %v; want nil, true", r.JSON(), r.IsZero())
	}
}

func TestCheckOrigin(t *testing.T) {
	r := mustParse(t, `{"origins": ["https://app.example.com", "https://*.example.org", "http://localhost:8080", "https://[2001:db8::1]"]}`)
	anywhere := mustParse(t, `{"origins": ["https://app.example.com"], "allow_no_origin": true}`)
	for _, tc := range []struct {
		r               Restrictions
		origin, referer string
		ok              bool
	}{
		{r, "https://app.example.com", "", true},
		{r, "HTTPS://App.Example.COM", "", true},
		{r, "https://app.example.com:443", "", true},
		{r, "https://app.example.com:8443", "", false},
		{r, "http://app.example.com", "", false},
		{r, "https://evil.example.com", "", false},
		{r, "https://app.example.com.evil.net", "", false},
		{r, "https://maps.example.org", "", true},
		{r, "https://a.b.example.org", "", true},
		{r, "https://example.org", "", false},
		{r, "https://xexample.org", "", false},
		{r, "http://localhost:8080", "", true},
		{r, "http://localhost", "", false},
		{r, "https://[2001:db8:0::1]", "", true},
		{r, "null", "", false},
		{r, "https://app.example.com/", "", false},
		{r, "", "https://app.example.com/maps/index.html?x=1", true},
		{r, "", "https://evil.example.com/app.example.com", false},
		{r, "https://evil.example.com", "https://app.example.com/", false}, // Origin first
		{r, "", "", false},
		{r, "", "not a url", false},
		{anywhere, "", "", true},
		{anywhere, "https://evil.example.com", "", false},
		{Restrictions{}, "https://evil.example.com", "", true},
	} {
		err := tc.r.CheckOrigin(tc.origin, tc.referer)
		if (err == nil) != tc.ok {
			t.Errorf("%v CheckOrigin(%q, %q) = %v, want ok %v", tc.r.Origins, tc.origin, tc.referer, err, tc.ok)
		}
		var ref *Refusal
		if err != nil && (!errors.As(err, &ref) || ref.Dimension != DimOrigin) {
			t.Errorf("CheckOrigin error %v is not an origin *Refusal", err)
		}
	}
}

func TestCheckNetwork(t *testing.T) {
	r := mustParse(t, `{"networks": ["203.0.113.0/24", "2001:db8::/32", "198.51.100.9/24"]}`)
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"203.0.113.77", true},
		{"::ffff:203.0.113.77", true},
		{"203.0.114.1", false},
		{"198.51.100.200", true}, // the prefix is masked
		{"2001:db8:1234::5", true},
		{"2001:db9::5", false},
		{"", false},
	} {
		var a netip.Addr
		if tc.addr != "" {
			a = netip.MustParseAddr(tc.addr)
		}
		err := r.CheckNetwork(a)
		if (err == nil) != tc.ok {
			t.Errorf("CheckNetwork(%s) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
	if err := (Restrictions{}).CheckNetwork(netip.Addr{}); err != nil {
		t.Errorf("no networks: CheckNetwork = %v", err)
	}
}

func TestCheck(t *testing.T) {
	r := mustParse(t, `{"origins": ["https://app.example.com"], "networks": ["10.0.0.0/8"], "routes": ["tiles", "within"], "layers": ["places"], "sets": ["places"]}`)
	ok := Request{Origin: "https://app.example.com", Client: netip.MustParseAddr("10.1.2.3"), Route: RouteTiles, Layer: "places"}
	for _, tc := range []struct {
		name string
		edit func(*Request)
		want Dimension // "" for admitted
	}{
		{"admitted", func(*Request) {}, ""},
		{"origin", func(q *Request) { q.Origin = "https://b.example.com"; q.Client = netip.Addr{} }, DimOrigin},
		{"network", func(q *Request) { q.Client = netip.MustParseAddr("11.0.0.1"); q.Route = "sets" }, DimNetwork},
		{"route", func(q *Request) { q.Route = RouteTileJSON }, DimRoute},
		{"layer", func(q *Request) { q.Layer = "roads" }, DimLayer},
		{"set", func(q *Request) { q.Route, q.Layer, q.Set = RouteWithin, "", "boundaries" }, DimSet},
		{"set admitted", func(q *Request) { q.Route, q.Layer, q.Set = RouteWithin, "", "places" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := ok
			tc.edit(&q)
			err := r.Check(q)
			var ref *Refusal
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tc.want != "" && (!errors.As(err, &ref) || ref.Dimension != tc.want):
				t.Errorf("Check = %v, want a refusal of %s", err, tc.want)
			}
		})
	}
	if err := (Restrictions{}).Check(Request{Route: "anything", Layer: "x", Set: "y"}); err != nil {
		t.Errorf("the zero Restrictions refused: %v", err)
	}
}

func mustParse(t *testing.T, s string) Restrictions {
	t.Helper()
	r, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOriginCandidates(t *testing.T) {
	r := mustParse(t, `{"origins": ["HTTPS://*.Example.org:443", "http://localhost:8080"]}`)
	if got := r.OriginPatterns(); !slices.Equal(got, []string{"https://*.example.org", "http://localhost:8080"}) {
		t.Errorf("OriginPatterns = %q", got)
	}
	for in, want := range map[string][]string{
		"https://a.b.example.org": {"https://a.b.example.org", "https://*.b.example.org", "https://*.example.org"},
		"https://example.org":     {"https://example.org"},
		"http://localhost:8080":   {"http://localhost:8080"},
		"https://[::1]:8443":      {"https://[::1]:8443"},
		"null":                    nil,
	} {
		if got := OriginCandidates(in); !slices.Equal(got, want) {
			t.Errorf("OriginCandidates(%q) = %q, want %q", in, got, want)
		}
	}
}
