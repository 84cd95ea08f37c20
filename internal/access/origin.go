package access

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// origin is a web origin, normalised: a lowercase scheme and host and an
// explicit port. As a pattern, wildcard says the host is "*." + host.
type origin struct {
	scheme, host string
	port         int
	wildcard     bool
}

// defaultPorts are the ports an origin of the scheme leaves out.
var defaultPorts = map[string]int{"http": 80, "https": 443}

// parseOrigin reads scheme://host[:port]: as a restriction's pattern when
// pattern is set (then "*." may start the host), else as a browser's
// Origin header.
func parseOrigin(s string, pattern bool) (origin, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !validScheme(scheme) {
		return origin{}, errors.New("want scheme://host[:port], such as https://app.example.com")
	}
	if i := strings.IndexAny(rest, "/?#@\\"); i >= 0 {
		return origin{}, errors.New("an origin has no path, query, fragment or user: want scheme://host[:port]")
	}
	o := origin{scheme: strings.ToLower(scheme)}
	hostport := rest
	if strings.HasPrefix(rest, "[") { // an IPv6 literal
		end := strings.Index(rest, "]")
		if end < 0 {
			return origin{}, errors.New("an IPv6 host lacks its closing ]")
		}
		a, err := netip.ParseAddr(rest[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return origin{}, errors.New("not an IPv6 address between [ ]")
		}
		o.host = "[" + a.String() + "]"
		hostport = rest[end+1:]
		if hostport != "" && hostport[0] != ':' {
			return origin{}, errors.New("want [address]:port")
		}
	} else {
		host, _, _ := strings.Cut(rest, ":")
		o.host = strings.ToLower(host)
		hostport = rest[len(host):]
		if pattern && strings.HasPrefix(o.host, "*.") {
			o.wildcard, o.host = true, o.host[2:]
			if strings.Count(o.host, ".") < 1 {
				return origin{}, errors.New("a wildcard stands for labels under a domain of two or more labels, such as https://*.example.com")
			}
		}
		if err := validHost(o.host); err != nil {
			return origin{}, err
		}
	}
	o.port = defaultPorts[o.scheme]
	if hostport != "" {
		p, err := strconv.Atoi(hostport[1:])
		if err != nil || p < 1 || p > 65535 || hostport[1] == '+' || hostport[1] == '-' {
			return origin{}, errors.New("the port must be a number from 1 to 65535")
		}
		o.port = p
	}
	if o.port == 0 {
		return origin{}, errors.New("a scheme other than http or https needs a port")
	}
	return o, nil
}

// validScheme reports whether s is a URL scheme (RFC 3986 section 3.1).
func validScheme(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for _, c := range []byte(s) {
		if !isLetter(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// validHost checks a lowercase host name of dot-separated labels of
// letters, digits and hyphens, or an IPv4 address.
func validHost(h string) error {
	if h == "" {
		return errors.New("the host is empty")
	}
	if len(h) > 253 {
		return errors.New("the host is longer than 253 characters")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("the host is not a name of letters, digits and hyphens between dots (a wildcard is only \"*.\" at its start)")
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return errors.New("the host is not a name of letters, digits and hyphens between dots (a wildcard is only \"*.\" at its start)")
			}
		}
	}
	return nil
}

// matches reports whether the origin o is the pattern p's: the same
// scheme and port, and the same host or, for a wildcard, a host of one or
// more labels under it.
func (p origin) matches(o origin) bool {
	if p.scheme != o.scheme || p.port != o.port || o.wildcard {
		return false
	}
	if !p.wildcard {
		return p.host == o.host
	}
	return len(o.host) > len(p.host)+1 && strings.HasSuffix(o.host, "."+p.host)
}

// String is the origin as a browser writes it (the default port left out).
func (p origin) String() string {
	s := p.scheme + "://"
	if p.wildcard {
		s += "*."
	}
	s += p.host
	if p.port != defaultPorts[p.scheme] {
		s += ":" + strconv.Itoa(p.port)
	}
	return s
}

// refererOrigin is the origin of a Referer header's URL, "" for none.
func refererOrigin(referer string) string {
	if referer == "" {
		return ""
	}
	u, err := url.Parse(referer)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// OriginPatterns returns r's origins in their canonical form, the form
// OriginCandidates names them in.
func (r Restrictions) OriginPatterns() []string {
	out := make([]string, len(r.origins))
	for i, p := range r.origins {
		out[i] = p.String()
	}
	return out
}

// OriginCandidates returns, in canonical form, every origin pattern that
// admits origin (an Origin header's value): the origin itself and a
// wildcard over each domain above its host; nil for a malformed origin.
// An index of patterns answers whether any admits an origin with as many
// lookups as the host has labels.
func OriginCandidates(s string) []string {
	o, err := parseOrigin(s, false)
	if err != nil {
		return nil
	}
	out := []string{o.String()}
	if strings.HasPrefix(o.host, "[") {
		return out
	}
	w := o
	w.wildcard = true
	for rest := o.host; ; {
		_, after, ok := strings.Cut(rest, ".")
		if !ok || !strings.Contains(after, ".") { // a wildcard covers two or more labels
			return out
		}
		w.host, rest = after, after
		out = append(out, w.String())
	}
}
