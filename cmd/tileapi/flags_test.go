package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

// marker is in every secret the tests set: it must never be printed.
const marker = "SECRETmarker"

// secrets are settings that hold secrets, each holding one (and a valid
// value otherwise, so that commands get as far as they would in use).
var secrets = map[string]string{
	"DATABASE_URL":                  "postgres://tileapi:pw" + marker + "@127.0.0.1:1/tileapi?sslmode=disable&sslpassword=" + marker,
	"REDIS_URL":                     "redis://default:pw" + marker + "@127.0.0.1:1/0",
	"TILEAPI_TILE_CACHE_REDIS_URL":  "redis://:pw" + marker + "@127.0.0.1:1/1",
	"TILEAPI_ADMIN_TOKEN":           "token-" + marker + "-0123456789abcdef",
	"TILEAPI_TOKEN_SECRET":          "secret-" + marker + "-0123456789abcdef0123",
	"TILEAPI_DEMO_KEYS":             "demo-" + marker + ":free",
	"TILEAPI_PUBLIC_URL":            "https://user:pw" + marker + "@tiles.example.com",
	"TILEAPI_ALERTS_WEBHOOK_URL":    "https://hooks.example.com/tileapi?token=" + marker,
	"TILEAPI_ALERTS_WEBHOOK_SECRET": "whsec-" + marker + "-0123456789abcdef0123",
}

// No command prints a secret it took from the environment: not its usage
// (-h, help COMMAND, a mistyped flag), not its errors. Every command of
// run, every keys and customers action.
func TestNoSecretPrinted(t *testing.T) {
	var argss [][]string
	for name := range commands() {
		argss = append(argss, []string{name, "-h"}, []string{name, "-no-such-flag"}, []string{"help", name})
	}
	for _, g := range []struct {
		name, usage string
		actions     map[string]action
	}{{"keys", keysUsage, keysActions}, {"customers", customersUsage, customersActions}} {
		for name := range g.actions {
			if !strings.Contains(g.usage, name) {
				t.Errorf("%s %s is not in its usage", g.name, name)
			}
			argss = append(argss, []string{g.name, name, "-h"}, []string{g.name, name, "-no-such-flag"})
		}
		argss = append(argss, []string{g.name, "-no-such-action"})
	}
	argss = append(argss, []string{"-h"}, []string{"help"}, []string{"-no-such-flag"})
	slices.SortFunc(argss, func(a, b []string) int { return slices.Compare(a, b) })
	for _, args := range argss {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			noSecret(t, args, func(k string) string { return secrets[k] })
		})
	}
}

// An error about a setting that holds a secret says what is wrong without
// the secret: a URL that does not parse, a database that does not answer.
func TestNoSecretInErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"serve, bad REDIS_URL", []string{"serve"}, map[string]string{"REDIS_URL": "redis://:pw" + marker + "%zz@127.0.0.1:1/0"}},
		{"serve, REDIS_URL bad database", []string{"serve"}, map[string]string{"REDIS_URL": "redis://:pw" + marker + "@127.0.0.1:1/x"}},
		{"serve, bad cluster URL", []string{"serve"}, map[string]string{"REDIS_URL": "redis://:pw" + marker + "@[::1?addr=b:1"}},
		{"serve, bad tile cache URL", []string{"serve"}, map[string]string{"TILEAPI_TILE_CACHE_REDIS_URL": "redis://:pw" + marker + "%zz@127.0.0.1:1/0"}},
		{"serve, bad DATABASE_URL", []string{"serve"}, map[string]string{"DATABASE_URL": "postgres://u:pw" + marker + "%zz@127.0.0.1:1/db"}},
		{"serve, unreachable DATABASE_URL", []string{"serve"}, map[string]string{"DATABASE_URL": secrets["DATABASE_URL"]}},
		{"serve, short admin token", []string{"serve"}, map[string]string{"TILEAPI_ADMIN_TOKEN": marker}},
		{"serve, short token secret", []string{"serve"}, map[string]string{"TILEAPI_TOKEN_SECRET": marker}},
		{"serve, short alerts secret", []string{"serve"}, map[string]string{"DATABASE_URL": secrets["DATABASE_URL"],
			"TILEAPI_ALERTS_WEBHOOK_URL": secrets["TILEAPI_ALERTS_WEBHOOK_URL"], "TILEAPI_ALERTS_WEBHOOK_SECRET": marker}},
		{"serve, alerts webhook not http", []string{"serve"}, map[string]string{"DATABASE_URL": secrets["DATABASE_URL"],
			"TILEAPI_ALERTS_WEBHOOK_URL": "ftp://u:pw" + marker + "@hooks.example.com/", "TILEAPI_ALERTS_WEBHOOK_SECRET": secrets["TILEAPI_ALERTS_WEBHOOK_SECRET"]}},
		{"serve, alerts without a database", []string{"serve"}, map[string]string{
			"TILEAPI_ALERTS_WEBHOOK_URL": secrets["TILEAPI_ALERTS_WEBHOOK_URL"], "TILEAPI_ALERTS_WEBHOOK_SECRET": secrets["TILEAPI_ALERTS_WEBHOOK_SECRET"]}},
		{"serve, demo key without a plan", []string{"serve"}, map[string]string{"TILEAPI_DEMO_KEYS": "demo-" + marker}},
		{"serve, demo key of no plan", []string{"serve"}, map[string]string{"TILEAPI_DEMO_KEYS": "demo-" + marker + ":nope"}},
		{"migrate, bad DATABASE_URL", []string{"migrate"}, map[string]string{"DATABASE_URL": "postgres://u:pw" + marker + "%zz@127.0.0.1:1/db"}},
		{"migrate, unreachable DATABASE_URL", []string{"migrate"}, map[string]string{"DATABASE_URL": secrets["DATABASE_URL"]}},
		{"keys list, DSN", []string{"keys", "list"}, map[string]string{"DATABASE_URL": "host=127.0.0.1 port=1 password=" + marker + " sslmode=bogus"}},
		{"keys list, unreachable DATABASE_URL", []string{"keys", "list"}, map[string]string{"DATABASE_URL": secrets["DATABASE_URL"]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := noSecret(t, tc.args, func(k string) string { return tc.env[k] })
			if err == nil {
				t.Error("no error")
			}
		})
	}
	// keys usage and reset reach serve's Redis once they have found the key
	// in the database: a database holding key 1, then a Redis URL with a
	// password that does not parse, or names a Redis that does not answer.
	dbURL := spatialtest.Schema(t)
	if err := run(context.Background(), []string{"tileapi", "keys", "create", "-plan", "free"}, func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL}[k]
	}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"usage", "reset"} {
		for what, redisURL := range map[string]string{
			"bad":         "redis://:pw" + marker + "%zz@127.0.0.1:1/0",
			"unreachable": secrets["REDIS_URL"],
		} {
			t.Run("keys "+action+", "+what+" REDIS_URL", func(t *testing.T) {
				env := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL}
				err := noSecret(t, []string{"keys", action, "1"}, func(k string) string { return env[k] })
				if err == nil || !strings.Contains(err.Error(), "REDIS_URL: parse") && !strings.Contains(err.Error(), "dial tcp 127.0.0.1:1") {
					t.Errorf("error %v, want one about Redis", err)
				}
			})
		}
	}
}

// noSecret runs tileapi with args and fails t if the marker of secrets is
// anywhere in what it prints or returns. It returns run's error.
func noSecret(t *testing.T, args []string, getenv func(string) string) error {
	t.Helper()
	// Nothing here is to be served: a command that would ends, with no
	// error, at the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, append([]string{"tileapi"}, args...), getenv, &stdout, &stderr)
	for what, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "the error": errorText(err)} {
		if strings.Contains(out, marker) {
			t.Errorf("%s holds a secret:\n%s", what, out)
		}
	}
	return err
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// redact hides credentials, and keeps what tells one server from another.
func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		in   string
		url  bool
		want string
	}{
		{"", true, ""},
		{"", false, ""},
		{"s3cr3t", false, "xxxxx"},
		{"redis://h:6379/0", false, "xxxxx"},
		{"redis://h:6379/0", true, "redis://h:6379/0"},
		{"redis://:pw@h:6379/0", true, "redis://xxxxx:xxxxx@h:6379/0"},
		{"redis://pw@h:6379/0", true, "redis://xxxxx:xxxxx@h:6379/0"},
		{"postgres://u:pw@db/x?sslmode=disable&password=pw", true, "postgres://xxxxx:xxxxx@db/x?password=xxxxx&sslmode=disable"},
		{"postgres:///x?host=/run/postgresql&sslkey=/k", true, "postgres:///x?host=%2Frun%2Fpostgresql&sslkey=xxxxx"},
		{"host=db password=pw", true, "xxxxx"},
		{"redis:pw", true, "xxxxx"},
		{"redis://:p%zz@h", true, "xxxxx"},
		{"https://tiles.example.com#frag", true, "https://tiles.example.com"},
	} {
		if got := redact(tc.in, tc.url); got != tc.want || strings.Contains(got, "pw") {
			t.Errorf("redact(%q, %v) = %q, want %q", tc.in, tc.url, got, tc.want)
		}
	}
}

// Lists are trimmed and their empty items left out; a bad item is a
// one-line error naming the setting, flag and variable.
func TestParseServeLists(t *testing.T) {
	env := map[string]string{
		"TILEAPI_TRUSTED_PROXIES": "127.0.0.1/32, ::1/128 ,, 10.0.0.1",
		"TILEAPI_CORS_ORIGINS":    " https://a.example ,https://b.example,",
		"TILEAPI_PUBLIC_HOSTS":    " maps.example.org , [2001:db8::1]:8443,,",
	}
	c, err := parseServe(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1/32", "::1/128", "10.0.0.1/32"}; !slices.Equal(c.proxies, want) {
		t.Errorf("trusted proxies %q, want %q", c.proxies, want)
	}
	if want := []string{"https://a.example", "https://b.example"}; !slices.Equal(c.origins, want) {
		t.Errorf("origins %q, want %q", c.origins, want)
	}
	if want := []string{"maps.example.org", "[2001:db8::1]:8443"}; !slices.Equal(c.hosts, want) {
		t.Errorf("public hosts %q, want %q", c.hosts, want)
	}
	c, err = parseServe([]string{"-cors-origins", "none"}, func(string) string { return "" }, io.Discard)
	if err != nil || c.origins == nil || len(c.origins) != 0 {
		t.Errorf("-cors-origins none: %q, %v; want an empty list", c.origins, err)
	}
}

// Every configuration error is one line naming the setting (its flag and,
// where it has one, its variable) and what is wrong.
func TestParseServeErrors(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{env: map[string]string{"TILEAPI_TRUSTED_PROXIES": "127.0.0.1/32, nonsense"}, want: `-trusted-proxies (TILEAPI_TRUSTED_PROXIES): "nonsense" is not a CIDR prefix`},
		{env: map[string]string{"TILEAPI_TRUSTED_PROXIES": "10.0.0.1/8"}, want: `-trusted-proxies (TILEAPI_TRUSTED_PROXIES): "10.0.0.1/8" has bits set past its /8: did you mean 10.0.0.0/8?`},
		{args: []string{"-trusted-proxies", "::1/129"}, want: `-trusted-proxies (TILEAPI_TRUSTED_PROXIES): "::1/129"`},
		{env: map[string]string{"TILEAPI_CORS_ORIGINS": " , "}, want: "-cors-origins (TILEAPI_CORS_ORIGINS): no origin"},
		{env: map[string]string{"TILEAPI_PUBLIC_HOSTS": "maps.example.org, https://maps.example.org"}, want: `-public-hosts (TILEAPI_PUBLIC_HOSTS): "https://maps.example.org" is not a host name or address with an optional port`},
		{args: []string{"-public-hosts", "maps.example.org:0"}, want: `-public-hosts (TILEAPI_PUBLIC_HOSTS): "maps.example.org:0" is not a host name`},
		{env: map[string]string{"TILEAPI_QUOTA_TIMEOUT": "fast"}, want: `-quota-timeout (TILEAPI_QUOTA_TIMEOUT): "fast" is not a duration`},
		{env: map[string]string{"TILEAPI_SHADOW": "maybe"}, want: `-shadow (TILEAPI_SHADOW): "maybe" is not 1, true, yes or 0, false, no`},
		{env: map[string]string{"TILEAPI_TILE_CACHE_TTL": "0s"}, want: "-tile-cache-ttl (TILEAPI_TILE_CACHE_TTL): 0s: want a positive duration"},
		{args: []string{"-key-cache-ttl", "-1s"}, want: "-key-cache-ttl (TILEAPI_KEY_CACHE_TTL): -1s: want a positive duration"},
		{env: map[string]string{"TILEAPI_QUOTA_MAX_WAIT": "-100ms"}, want: "-quota-max-wait (TILEAPI_QUOTA_MAX_WAIT): -100ms: want 0 (off) or a positive duration"},
		{env: map[string]string{"TILEAPI_ANONYMOUS_IPV6_PREFIX": "/56"}, want: `-anonymous-ipv6-prefix (TILEAPI_ANONYMOUS_IPV6_PREFIX): "/56" is not a whole number`},
		{env: map[string]string{"TILEAPI_ANONYMOUS_IPV6_PREFIX": "16"}, want: "-anonymous-ipv6-prefix (TILEAPI_ANONYMOUS_IPV6_PREFIX): 16: want a prefix length from 32 to 128"},
		{env: map[string]string{"TILEAPI_MAX_CONNS": "-5"}, want: "-max-conns (TILEAPI_MAX_CONNS): -5: want a positive number"},
		{env: map[string]string{"TILEAPI_LOG_LEVEL": "loud"}, want: `-log-level (TILEAPI_LOG_LEVEL): "loud": want debug, info, warn or error`},
		{env: map[string]string{"TILEAPI_QUOTA_FAILURE": "ajar"}, want: `-quota-failure (TILEAPI_QUOTA_FAILURE): "ajar": want open or closed`},
		{env: map[string]string{"TILEAPI_UNKNOWN_KEYS": "many"}, want: `-unknown-keys (TILEAPI_UNKNOWN_KEYS): "many" is not a whole number`},
		{args: []string{"-db-max-conns", "0"}, want: "-db-max-conns 0: want a positive number"},
		{env: map[string]string{"TILEAPI_REDIS_PREFIX": "a{b}:"}, want: `-redis-prefix (TILEAPI_REDIS_PREFIX): "a{b}:": want no braces`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := parseServe(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line starting %q", errorText(err), tc.want)
			}
		})
	}
	// The anonymous prefix has its default, and the flag beats the variable.
	for _, tc := range []struct {
		env  string
		args []string
		want int
	}{{"", nil, 64}, {"56", nil, 56}, {"56", []string{"-anonymous-ipv6-prefix", "48"}, 48}} {
		c, err := parseServe(tc.args, func(k string) string { return map[string]string{"TILEAPI_ANONYMOUS_IPV6_PREFIX": tc.env}[k] }, io.Discard)
		if err != nil || c.anonymousIPv6Prefix != tc.want {
			t.Errorf("TILEAPI_ANONYMOUS_IPV6_PREFIX %q, args %q: /%d, %v; want /%d", tc.env, tc.args, c.anonymousIPv6Prefix, err, tc.want)
		}
	}
}

// FuzzParseServe feeds serve's configuration parser arbitrary variables
// and arguments: it never panics, and its errors are one line.
func FuzzParseServe(f *testing.F) {
	f.Add("TILEAPI_TRUSTED_PROXIES=127.0.0.1/32, ::1/128", "-addr\x00:9000")
	f.Add("TILEAPI_CORS_ORIGINS=,\nTILEAPI_SHADOW=yes", "")
	f.Add("TILEAPI_SHADOW=maybe\nTILEAPI_QUOTA_TIMEOUT=fast\nTILEAPI_UNKNOWN_KEYS=x", "")
	f.Add("TILEAPI_QUOTA_TIMEOUT=-1s\nTILEAPI_MAX_CONNS=99999999999999999999", "-anonymous-ipv6-prefix\x0056")
	f.Add("TILEAPI_ANONYMOUS_IPV6_PREFIX=129\nREDIS_URL=redis://:p@h", "-trusted-proxies\x00fe80::1%eth0")
	f.Add("TILEAPI_LOG_LEVEL=DEBUG+2\nTILEAPI_UNKNOWN_KEYS=-1", "-h")
	f.Fuzz(func(t *testing.T, env, args string) {
		vars := map[string]string{}
		for _, line := range strings.Split(env, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		var argv []string
		if args != "" {
			argv = strings.Split(args, "\x00")
		}
		_, err := parseServe(argv, func(k string) string { return vars[k] }, io.Discard)
		if err != nil && !errors.Is(err, flag.ErrHelp) && strings.Contains(err.Error(), "\n") {
			t.Errorf("a configuration error of more than one line: %q", err)
		}
	})
}
