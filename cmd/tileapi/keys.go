package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tileapi/tileapi/internal/access"
	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/quota"
)

const keysUsage = `tileapi keys create -plan PLAN [-name NAME] [-kind publishable|secret] [-customer ID] | list | show ID | revoke ID
  | set-plan ID PLAN | set-customer ID CUSTOMER_ID | set-customer ID -none
  | override ID [NAME=MAX/WINDOW ...] [-max-in-flight N] [-overage LIMIT,... | -no-overage]
  | override ID -clear
  | restrict ID [-origins O,...] [-allow-no-origin] [-networks CIDR,...] [-routes R,...]
      [-layers L,...] [-sets S,...] | restrict ID -clear
  | expire ID -at RFC3339 | expire ID -in 720h | expire ID -never
  | reroll ID [-overlap 24h] | usage ID | reset ID
  [-database-url URL] [-plans-file FILE]
  usage and reset read the quotas in Redis: -redis-url URL ($REDIS_URL), -redis-prefix ($TILEAPI_REDIS_PREFIX)`

// runKeys manages the API keys in the database: it creates one (printing
// its secret once, as the last line of stdout), lists them, revokes one,
// moves one to another plan or customer, and more (keysUsage).
func runKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runActions(ctx, "keys", keysUsage, keysActions, args, getenv, stdout, stderr)
}

// runActions runs the action of group (keys, customers) that args name,
// with its flags and arguments, against the key store of the database.
func runActions(ctx context.Context, group, usage string, actions map[string]action, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: " + usage)
	}
	name, args := args[0], args[1:]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		_, err := fmt.Fprintln(stdout, "usage: "+usage)
		return err
	}
	a, ok := actions[name]
	if !ok {
		return fmt.Errorf("unknown %s command %q; usage: %s", group, name, usage)
	}
	fs := flag.NewFlagSet(group+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	prepare := a.flags(fs, getenv)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != a.args && !(a.args < 0 && len(pos) >= 1) {
		return fmt.Errorf("%s %s: want %d arguments, have %q; usage: %s", group, name, a.args, pos, usage)
	}
	var id int64
	if a.args != 0 {
		if id, err = strconv.ParseInt(pos[0], 10, 64); err != nil {
			return fmt.Errorf("%s %s: id %q is not a number", group, name, pos[0])
		}
	}
	// What can be checked without the database is, before connecting.
	run, err := prepare(id, pos)
	if err != nil {
		return fmt.Errorf("%s %s: %w", group, name, err)
	}
	pool, _, err := connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("%s %s: %w", group, name, err)
	}
	defer pool.Close()
	if err := run(ctx, keys.NewPostgres(pool), stdout); err != nil {
		return fmt.Errorf("%s %s: %w", group, name, err)
	}
	return nil
}

// action is one command of tileapi keys or customers: how many arguments
// it takes besides flags (-1: an id and any number more), and its flags.
// flags defines them on fs and returns prepare, which checks the
// arguments once parsed (the id, if it takes one, and the positional
// ones) and returns the work to run against the key store.
type action struct {
	args  int
	flags func(fs *flag.FlagSet, getenv func(string) string) (prepare func(id int64, pos []string) (work, error))
}

type work func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error

var keysActions = map[string]action{
	"expire": {args: 1, flags: func(fs *flag.FlagSet, _ func(string) string) func(int64, []string) (work, error) {
		at := fs.String("at", "", "when the key stops working, RFC 3339 (2027-01-01T00:00:00Z)")
		in := fs.Duration("in", 0, "how long from now the key stops working (720h)")
		never := fs.Bool("never", false, "the key never expires")
		return func(id int64, _ []string) (work, error) {
			t, err := expiryOf(*at, *in, *never, time.Now())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, err := s.SetExpiry(ctx, id, t)
				if err != nil {
					return err
				}
				if k.ExpiresAt.IsZero() {
					fmt.Fprintf(stdout, "key %d (%s) never expires\n", k.ID, k.Prefix)
					return nil
				}
				fmt.Fprintf(stdout, "key %d (%s) expires at %s\n", k.ID, k.Prefix, timeOrDash(k.ExpiresAt))
				return nil
			}, nil
		}
	}},
	"reroll": {args: 1, flags: func(fs *flag.FlagSet, _ func(string) string) func(int64, []string) (work, error) {
		overlap := fs.Duration("overlap", 24*time.Hour, "how long the old secret keeps working; 0s: it stops at once")
		return func(id int64, _ []string) (work, error) {
			if *overlap < 0 {
				return nil, fmt.Errorf("-overlap %s: want 0s or more", *overlap)
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, secret, err := s.Reroll(ctx, id, *overlap)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "key %d is now %s; its old secret works until %s\n", k.ID, k.Prefix, timeOrDash(k.PreviousValidUntil))
				fmt.Fprintln(stdout, "its new secret, shown only this once (tileapi keeps a hash of it):")
				fmt.Fprintln(stdout, secret)
				return nil
			}, nil
		}
	}},
	"usage": {args: 1, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		q := quotaFlags(fs, getenv)
		return func(id int64, _ []string) (work, error) {
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				return keyUsage(ctx, s, id, q, stdout)
			}, nil
		}
	}},
	"reset": {args: 1, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		q := quotaFlags(fs, getenv)
		return func(id int64, _ []string) (work, error) {
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, err := s.Get(ctx, id)
				if err != nil {
					return err
				}
				store, done, err := q.open()
				if err != nil {
					return err
				}
				defer done()
				if err := store.Reset(ctx, httpapi.KeyIdentity(k)); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "key %d (%s): usage reset\n", k.ID, k.Prefix)
				return nil
			}, nil
		}
	}},
	"create": {args: 0, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		plan := fs.String("plan", "", "the key's plan (required)")
		name := fs.String("name", "", "a name for the key, for people")
		kindName := fs.String("kind", string(keys.Secret), "publishable (tk_pub_, for web pages) or secret (tk_sec_, for servers only)")
		customer := fs.Int64("customer", 0, "the id of the customer the key belongs to (tileapi customers list); none by default")
		plansFile := plansFlag(fs, getenv)
		return func(int64, []string) (work, error) {
			kind, err := keys.ParseKind(*kindName)
			if err != nil {
				return nil, fmt.Errorf("-kind: %w", err)
			}
			if *customer < 0 {
				return nil, fmt.Errorf("-customer %d: want a customer's id", *customer)
			}
			if err := checkPlan(*plansFile, *plan); err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, secret, err := s.CreateKind(ctx, kind, *name, *plan, *customer)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "created %s key %d (%s) on plan %s%s\n", k.Kind(), k.ID, k.Prefix, k.Plan, ofCustomer(k))
				fmt.Fprintln(stdout, "its secret, shown only this once (tileapi keeps a hash of it):")
				fmt.Fprintln(stdout, secret)
				return nil
			}, nil
		}
	}},
	"list": {args: 0, flags: func(*flag.FlagSet, func(string) string) func(int64, []string) (work, error) {
		return func(int64, []string) (work, error) {
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				ks, err := s.List(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tPREFIX\tKIND\tNAME\tPLAN\tCUSTOMER\tOVERRIDES\tRESTRICTIONS\tCREATED\tEXPIRES\tREVOKED")
				for _, k := range ks {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Kind(), orDash(k.Name), k.Plan, idOrDash(k.CustomerID),
						orDash(compactJSON(k.Overrides)), orDash(compactJSON(k.Restrictions)), timeOrDash(k.CreatedAt), timeOrDash(k.ExpiresAt), timeOrDash(k.RevokedAt))
				}
				return tw.Flush()
			}, nil
		}
	}},
	"show": {args: 1, flags: func(*flag.FlagSet, func(string) string) func(int64, []string) (work, error) {
		return func(id int64, _ []string) (work, error) {
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, err := s.Get(ctx, id)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
				for _, f := range [][2]string{
					{"id", strconv.FormatInt(k.ID, 10)}, {"prefix", k.Prefix}, {"kind", string(k.Kind())}, {"name", orDash(k.Name)},
					{"plan", k.Plan}, {"customer", idOrDash(k.CustomerID)}, {"overrides", orDash(compactJSON(k.Overrides))},
					{"restrictions", orDash(compactJSON(k.Restrictions))}, {"created", timeOrDash(k.CreatedAt)},
					{"expires", timeOrDash(k.ExpiresAt)}, {"revoked", timeOrDash(k.RevokedAt)},
				} {
					fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
				}
				return tw.Flush()
			}, nil
		}
	}},
	"revoke": {args: 1, flags: func(*flag.FlagSet, func(string) string) func(int64, []string) (work, error) {
		return func(id int64, _ []string) (work, error) {
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, err := s.Revoke(ctx, id)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "key %d (%s) revoked at %s\n", k.ID, k.Prefix, timeOrDash(k.RevokedAt))
				return nil
			}, nil
		}
	}},
	"set-plan": {args: 2, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		plansFile := plansFlag(fs, getenv)
		return func(id int64, pos []string) (work, error) {
			plan := pos[1]
			if err := checkPlan(*plansFile, plan); err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, err := s.SetPlan(ctx, id, plan)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "key %d (%s) is on plan %s\n", k.ID, k.Prefix, k.Plan)
				return nil
			}, nil
		}
	}},
	"set-customer": {args: -1, flags: func(fs *flag.FlagSet, _ func(string) string) func(int64, []string) (work, error) {
		none := fs.Bool("none", false, "take the key out of its customer")
		return func(id int64, pos []string) (work, error) {
			customer, err := customerArg(pos[1:], *none)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, err := s.SetCustomer(ctx, id, customer)
				if err != nil {
					return err
				}
				if k.CustomerID == 0 {
					fmt.Fprintf(stdout, "key %d (%s) belongs to no customer; its own usage starts anew\n", k.ID, k.Prefix)
					return nil
				}
				fmt.Fprintf(stdout, "key %d (%s) belongs to customer %d; its own usage starts anew\n", k.ID, k.Prefix, k.CustomerID)
				return nil
			}, nil
		}
	}},
	"override": {args: -1, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		maxInFlight := fs.Int("max-in-flight", -1, "the key's own in-flight limit; 0: no limit")
		overage := fs.String("overage", "", "comma-separated day and month limits the key goes on past as metered overage instead of 429 (soft caps), in place of its plan's")
		noOverage := fs.Bool("no-overage", false, "every limit of the key a hard cap, whatever its plan's overage")
		alerts := fs.String("alerts", "", "the key's alert thresholds of day and month limits, in place of its plan's: LIMIT=P,P,...[;LIMIT=...], such as month=50,80,100; LIMIT= for none")
		clear := fs.Bool("clear", false, "remove the key's overrides: back to its plan alone")
		plansFile := plansFlag(fs, getenv)
		return func(id int64, pos []string) (work, error) {
			o, err := parseOverrides(pos[1:], *maxInFlight, *overage, *alerts, *noOverage, *clear)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				return overrideKey(ctx, s, id, o, *plansFile, stdout)
			}, nil
		}
	}},
	"restrict": {args: 1, flags: func(fs *flag.FlagSet, _ func(string) string) func(int64, []string) (work, error) {
		var f restrictFlags
		fs.StringVar(&f.origins, "origins", "", "comma-separated web origins whose pages may use the key: https://app.example.com, https://*.example.com")
		fs.BoolVar(&f.allowNoOrigin, "allow-no-origin", false, "with -origins: also admit requests with neither Origin nor Referer (servers, scripts)")
		fs.StringVar(&f.networks, "networks", "", "comma-separated client networks (CIDR) the key may be used from")
		fs.StringVar(&f.routes, "routes", "", "comma-separated routes the key may call: "+strings.Join(access.Routes(), ", "))
		fs.StringVar(&f.layers, "layers", "", "comma-separated tile layers the key may ask for")
		fs.StringVar(&f.sets, "sets", "", "comma-separated geofence sets the key may ask")
		fs.BoolVar(&f.clear, "clear", false, "remove the key's restrictions: it works anywhere, for anything its plan sells")
		return func(id int64, _ []string) (work, error) {
			stored, err := f.restrictions()
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				k, err := s.SetRestrictions(ctx, id, stored)
				if err != nil {
					return err
				}
				if stored == nil {
					fmt.Fprintf(stdout, "key %d (%s) has no restrictions\n", k.ID, k.Prefix)
					return nil
				}
				fmt.Fprintf(stdout, "key %d (%s) restricted to %s\n", k.ID, k.Prefix, k.Restrictions)
				return nil
			}, nil
		}
	}},
}

// customerArg is the customer that keys set-customer's arguments after the
// key id name: one CUSTOMER_ID, or none with -none (0).
func customerArg(args []string, none bool) (int64, error) {
	switch {
	case none && len(args) == 0:
		return 0, nil
	case none || len(args) != 1:
		return 0, errors.New("say which customer: CUSTOMER_ID, or -none alone")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("customer id %q is not a customer's id", args[0])
	}
	return id, nil
}

// ofCustomer is " of customer N" for a key of a customer, "" for another.
func ofCustomer(k keys.Key) string {
	if k.CustomerID == 0 {
		return ""
	}
	return fmt.Sprintf(" of customer %d", k.CustomerID)
}

// restrictFlags are the flags of keys restrict.
type restrictFlags struct {
	origins, networks, routes, layers, sets string
	allowNoOrigin, clear                    bool
}

// restrictions is the JSON the flags make, checked by access.Parse; nil
// for -clear, which goes alone.
func (f restrictFlags) restrictions() ([]byte, error) {
	set := f.origins != "" || f.networks != "" || f.routes != "" || f.layers != "" || f.sets != "" || f.allowNoOrigin
	if f.clear {
		if set {
			return nil, errors.New("-clear goes alone")
		}
		return nil, nil
	}
	if !set {
		return nil, errors.New("no restriction: give -origins, -networks, -routes, -layers or -sets, or -clear")
	}
	b, err := json.Marshal(access.Restrictions{
		Origins: commaList(f.origins), AllowNoOrigin: f.allowNoOrigin, Networks: commaList(f.networks),
		Routes: commaList(f.routes), Layers: commaList(f.layers), Sets: commaList(f.sets),
	})
	if err != nil {
		return nil, err
	}
	r, err := access.Parse(b)
	var fe *param.Error
	if errors.As(err, &fe) { // "origins[1]" is the second of -origins
		flagName, _, _ := strings.Cut(strings.ReplaceAll(fe.Field, "_", "-"), "[")
		return nil, fmt.Errorf("-%s: %s", flagName, fe.Reason)
	}
	if err != nil {
		return nil, err
	}
	return r.JSON(), nil
}

// commaList splits a comma-separated flag value, trimming spaces; nil for
// an empty one.
func commaList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// expiryOf is the expiry that -at, -in or -never (exactly one of them)
// ask for, from now: the zero time for never.
func expiryOf(at string, in time.Duration, never bool, now time.Time) (time.Time, error) {
	n := 0
	for _, given := range []bool{at != "", in != 0, never} {
		if given {
			n++
		}
	}
	if n != 1 {
		return time.Time{}, errors.New("say when: one of -at RFC3339, -in DURATION, -never")
	}
	switch {
	case never:
		return time.Time{}, nil
	case in != 0:
		if in < 0 {
			return time.Time{}, fmt.Errorf("-in %s: want a duration from now, such as 720h", in)
		}
		return now.Add(in), nil
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}, fmt.Errorf("-at %q: not an RFC 3339 time such as 2027-01-01T00:00:00Z", at)
	}
	return t, nil
}

// quotaSettings are where usage and reset find the quotas: the Redis of
// serve, and the plans that say a key's limits.
type quotaSettings struct {
	redisURL, prefix, plansFile *string
}

// quotaFlags adds the flags of the commands that read the quotas.
func quotaFlags(fs *flag.FlagSet, getenv func(string) string) quotaSettings {
	prefix := getenv("TILEAPI_REDIS_PREFIX")
	if prefix == "" {
		prefix = "tileapi:"
	}
	q := quotaSettings{
		redisURL:  new(string),
		prefix:    fs.String("redis-prefix", prefix, "serve's Redis prefix ($TILEAPI_REDIS_PREFIX)"),
		plansFile: plansFlag(fs, getenv),
	}
	secretURLVar(fs, q.redisURL, "redis-url", getenv("REDIS_URL"), "the Redis `URL` that holds the quotas, as serve's REDIS_URL ($REDIS_URL)")
	return q
}

// open returns the quota store serve uses, and a function that closes it.
func (q quotaSettings) open() (*quota.Redis, func(), error) {
	if *q.redisURL == "" {
		return nil, nil, errors.New("no Redis: usage lives in serve's Redis; set REDIS_URL or -redis-url (a serve without REDIS_URL holds usage in its process: use the admin API)")
	}
	rdb, err := openRedis("REDIS_URL", *q.redisURL)
	if err != nil {
		return nil, nil, err
	}
	return quota.NewRedis(rdb, quota.WithPrefix(*q.prefix+"q:")), func() { rdb.Close() }, nil
}

// keyUsage prints key id's usage of each of its limits, its plan with its
// overrides, and for a key of a customer, its customer's usage, as GET
// /admin/keys/{id}/usage reads them.
func keyUsage(ctx context.Context, s *keys.Postgres, id int64, q quotaSettings, stdout io.Writer) error {
	k, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	ps, err := loadPlans(*q.plansFile)
	if err != nil {
		return err
	}
	var o plans.Overrides
	if k.Overrides != nil {
		if o, err = plans.ParseOverrides(k.Overrides); err != nil {
			return fmt.Errorf("key %d's overrides: %w", k.ID, err)
		}
	}
	p, err := ps.KeyPlan(k.Plan, o)
	if err != nil {
		return err
	}
	store, done, err := q.open()
	if err != nil {
		return err
	}
	defer done()
	d, err := store.Peek(ctx, httpapi.KeyIdentity(k), p.Quota)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %d (%s) on plan %s%s\n", k.ID, k.Prefix, p.Name, ofCustomer(k))
	if err := printUsage(stdout, d); err != nil || k.CustomerID == 0 {
		return err
	}
	return customerUsage(ctx, s, store, ps, k.CustomerID, stdout)
}

// printUsage prints the state of each limit of d, a table.
func printUsage(stdout io.Writer, d quota.Decision) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LIMIT\tMAX\tWINDOW\tUSED\tREMAINING\tRESETS IN")
	for _, l := range d.Limits {
		window := l.Limit.Window.String()
		if l.Limit.Period != quota.Sliding {
			window = string(l.Limit.Period)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", l.Limit.Name, l.Limit.Max, window, l.Used, l.Remaining, l.ResetAfter.Round(time.Second))
	}
	return tw.Flush()
}

// compactJSON is stored JSON on one line, "" for none.
func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if b == nil || json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// overrideKey gives key id the overrides o, checked against its plan in
// the plans of plansFile; the zero o removes its overrides.
func overrideKey(ctx context.Context, s *keys.Postgres, id int64, o plans.Overrides, plansFile string, stdout io.Writer) error {
	k, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	var stored []byte
	if !o.IsZero() {
		if err := checkOverrides(plansFile, k.Plan, o); err != nil {
			return err
		}
		if stored, err = json.Marshal(o); err != nil {
			return err
		}
	}
	if k, err = s.SetOverrides(ctx, id, stored); err != nil {
		return err
	}
	if stored == nil {
		fmt.Fprintf(stdout, "key %d (%s) has no overrides: plan %s alone\n", k.ID, k.Prefix, k.Plan)
		return nil
	}
	fmt.Fprintf(stdout, "key %d (%s): plan %s with overrides %s\n", k.ID, k.Prefix, k.Plan, k.Overrides)
	return nil
}

// parseOverrides reads NAME=MAX/WINDOW arguments ("burst=500/5s"), the
// in-flight flag (-1 when not given) and the overage flags (the limits
// that go into overage, comma-separated; or none, with noOverage) into
// Overrides; clear asks for none, and goes with nothing else.
func parseOverrides(args []string, maxInFlight int, overage, alerts string, noOverage, clear bool) (plans.Overrides, error) {
	var o plans.Overrides
	if clear {
		if len(args) > 0 || maxInFlight >= 0 || overage != "" || alerts != "" || noOverage {
			return o, errors.New("-clear goes alone")
		}
		return o, nil
	}
	switch {
	case overage != "" && noOverage:
		return o, errors.New("-overage and -no-overage: say one")
	case overage != "":
		names := strings.Split(overage, ",")
		o.Overage = &names
	case noOverage:
		o.Overage = &[]string{}
	}
	if alerts != "" {
		a, err := parseAlerts(alerts)
		if err != nil {
			return o, err
		}
		o.Alerts = a
	}
	for _, a := range args {
		name, rest, ok1 := strings.Cut(a, "=")
		maxText, window, ok2 := strings.Cut(rest, "/")
		max, err := strconv.ParseInt(maxText, 10, 64)
		if !ok1 || !ok2 || err != nil {
			return o, fmt.Errorf("limit %q is not NAME=MAX/WINDOW, such as burst=500/5s or month=50000/month", a)
		}
		l := plans.FileLimit{Name: name, Max: max, Window: window}
		if window == "day" || window == "month" { // a calendar period, not a window
			l.Window, l.Period = "", window
		}
		o.Limits = append(o.Limits, l)
	}
	if maxInFlight >= 0 {
		o.MaxInFlight = &maxInFlight
	}
	if o.IsZero() {
		return o, errors.New("no limit, no -max-in-flight, no -overage and no -alerts: say what to override, or -clear")
	}
	return o, nil
}

// parseAlerts reads -alerts: LIMIT=P,P,... for each limit, separated by
// semicolons; LIMIT= alone turns that limit's alerts off. The percents are
// checked with the plan (plans.Set.KeyPlan).
func parseAlerts(text string) (plans.Alerts, error) {
	a := plans.Alerts{}
	for _, part := range strings.Split(text, ";") {
		name, list, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("alerts %q is not LIMIT=P,P,..., such as month=50,80,100", part)
		}
		pcts := []int{}
		for _, p := range strings.Split(list, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			n, err := strconv.Atoi(strings.TrimSuffix(p, "%"))
			if err != nil {
				return nil, fmt.Errorf("alerts of %s: %q is not a whole percent", name, p)
			}
			pcts = append(pcts, n)
		}
		a[name] = pcts
	}
	return a, nil
}

// checkOverrides reports overrides that do not make a valid plan of plan.
func checkOverrides(plansFile, plan string, o plans.Overrides) error {
	ps, err := loadPlans(plansFile)
	if err != nil {
		return err
	}
	_, err = ps.KeyPlan(plan, o)
	return err
}

// plansFlag adds the -plans-file flag, which defaults to $TILEAPI_PLANS_FILE.
func plansFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	return fs.String("plans-file", getenv("TILEAPI_PLANS_FILE"), "JSON file of plans replacing or adding to the defaults ($TILEAPI_PLANS_FILE)")
}

// checkPlan returns an error naming the valid plans unless the plans of
// plansFile (the defaults where it is empty) include plan.
func checkPlan(plansFile, plan string) error {
	ps, err := loadPlans(plansFile)
	if err != nil {
		return err
	}
	_, err = ps.KeyPlan(plan, plans.Overrides{})
	return err
}

// parseInterspersed parses the flags of fs wherever they stand among args
// and returns the other arguments, so that `keys revoke 7 -database-url
// URL` works as well as `keys revoke -database-url URL 7`.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func idOrDash(id int64) string {
	if id == 0 {
		return "-"
	}
	return strconv.FormatInt(id, 10)
}
