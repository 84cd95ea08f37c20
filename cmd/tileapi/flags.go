package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/tileapi/tileapi/internal/httpapi"
)

// secret is a string flag holding a secret, or a value that may hold one:
// a token, or a URL with a password. It prints redacted (see redact), and
// the flag package shows a flag's default by printing it: so usage, which
// -h and every mistyped flag print, never shows a secret taken from the
// environment.
type secret struct {
	p   *string
	url bool // a URL: shown with its credentials hidden, not hidden whole
}

func (s secret) String() string {
	if s.p == nil { // the flag package's zero value, for usage
		return ""
	}
	return redact(*s.p, s.url)
}

func (s secret) Set(v string) error {
	*s.p = v
	return nil
}

// secretVar defines a flag of fs holding a token, stored in p, whose
// default is def.
func secretVar(fs *flag.FlagSet, p *string, name, def, usage string) {
	*p = def
	fs.Var(secret{p: p}, name, usage)
}

// secretURLVar defines a flag of fs holding a URL that may carry
// credentials, stored in p, whose default is def.
func secretURLVar(fs *flag.FlagSet, p *string, name, def, usage string) {
	*p = def
	fs.Var(secret{p: p, url: true}, name, usage)
}

// hidden stands for what redact hides.
const hidden = "xxxxx"

// redact is v fit to print. A token is hidden whole. A URL keeps its
// scheme, host and path; its user name and password, and the values of
// query parameters that may be credentials (password=, sslpassword=,
// token=...), are hidden; a URL that does not parse, or a connection
// string that is not a URL (host=... password=...), is hidden whole.
func redact(v string, isURL bool) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if !isURL || err != nil || u.Scheme == "" || u.Opaque != "" {
		return hidden
	}
	if u.User != nil {
		u.User = url.UserPassword(hidden, hidden)
	}
	q := u.Query()
	for name := range q {
		if credential(name) {
			q[name] = []string{hidden}
		}
	}
	u.RawQuery, u.Fragment, u.RawFragment = q.Encode(), "", ""
	return u.String()
}

// credential reports whether a query parameter of this name may hold a
// credential.
func credential(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"pass", "secret", "token", "key", "auth", "cred"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// urlError is err without the URL that a *url.Error quotes whole, password
// included.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// setting names a setting of serve by its flag and its environment
// variable, for error messages.
func setting(flagName, envName string) string {
	return "-" + flagName + " (" + envName + ")"
}

// splitList is the items of a comma-separated list, each trimmed of
// spaces, empty ones left out: "a, b,," is [a b].
func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// parsePrefixes reads a comma-separated list of CIDR prefixes (a bare
// address is its own /32 or /128) into their canonical forms.
func parsePrefixes(list string) ([]string, error) {
	var out []string
	for _, item := range splitList(list) {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			a, aerr := netip.ParseAddr(item)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR prefix such as 10.0.0.0/8 or an address", item)
			}
			p = netip.PrefixFrom(a.Unmap().WithZone(""), a.Unmap().BitLen())
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("%q has bits set past its /%d: did you mean %s?", item, p.Bits(), p.Masked())
		}
		out = append(out, p.String())
	}
	return out, nil
}

// parseOrigins reads -cors-origins: a comma-separated list of origins, *
// for any, keys for the origins keys' restrictions allow
// (httpapi.CORSKeys), or none for no CORS (an empty, non-nil list).
func parseOrigins(list string) ([]string, error) {
	switch strings.TrimSpace(list) {
	case "none":
		return []string{}, nil
	case httpapi.CORSKeys:
		return []string{httpapi.CORSKeys}, nil
	}
	origins := splitList(list)
	switch {
	case len(origins) == 0:
		return nil, errors.New("no origin: * for any, keys for those keys allow, none for no CORS")
	case slices.Contains(origins, httpapi.CORSKeys):
		return nil, errors.New("keys goes alone: the origins come from the keys' restrictions")
	}
	return origins, nil
}

// parseBool reads a boolean setting: 1, true, yes or on, and 0, false, no
// or off, in any case.
func parseBool(s string) (v, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "yes", "on":
		return true, true
	case "0", "f", "false", "no", "off":
		return false, true
	}
	return false, false
}
