package main

import (
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

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
)

const keysUsage = `tileapi keys create -plan PLAN [-name NAME] | list | revoke ID | set-plan ID PLAN
  | override ID [NAME=MAX/WINDOW ...] [-max-in-flight N] | override ID -clear
  [-database-url URL] [-plans-file FILE]`

// runKeys manages the API keys in the database: it creates one (printing
// its secret once, as the last line of stdout), lists them, revokes one or
// moves one to another plan.
func runKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: " + keysUsage)
	}
	action, args := args[0], args[1:]
	if action == "-h" || action == "-help" || action == "--help" || action == "help" {
		_, err := fmt.Fprintln(stdout, "usage: "+keysUsage)
		return err
	}
	fs := flag.NewFlagSet("keys "+action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	var plansFile, plan, name *string
	var maxInFlight *int
	var clear *bool
	positional := 0 // how many arguments the action takes besides flags; -1: an id and any number more
	switch action {
	case "create":
		plan = fs.String("plan", "", "the key's plan (required)")
		name = fs.String("name", "", "a name for the key, for people")
		plansFile = plansFlag(fs, getenv)
	case "list":
	case "revoke":
		positional = 1
	case "set-plan":
		positional = 2
		plansFile = plansFlag(fs, getenv)
	case "override":
		positional = -1
		maxInFlight = fs.Int("max-in-flight", -1, "the key's own in-flight limit; 0: no limit")
		clear = fs.Bool("clear", false, "remove the key's overrides: back to its plan alone")
		plansFile = plansFlag(fs, getenv)
	default:
		return fmt.Errorf("unknown keys command %q; usage: %s", action, keysUsage)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != positional && !(positional < 0 && len(pos) >= 1) {
		return fmt.Errorf("keys %s: want %d arguments, have %q; usage: %s", action, positional, pos, keysUsage)
	}
	var id int64
	if positional != 0 {
		if id, err = strconv.ParseInt(pos[0], 10, 64); err != nil {
			return fmt.Errorf("keys %s: key id %q is not a number", action, pos[0])
		}
	}
	if positional == 2 {
		plan = &pos[1]
	}
	if plan != nil {
		if err := checkPlan(*plansFile, *plan); err != nil {
			return fmt.Errorf("keys %s: %w", action, err)
		}
	}

	pool, _, err := connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("keys %s: %w", action, err)
	}
	defer pool.Close()
	s := keys.NewPostgres(pool)
	switch action {
	case "create":
		k, secret, err := s.Create(ctx, *name, *plan)
		if err != nil {
			return fmt.Errorf("keys create: %w", err)
		}
		fmt.Fprintf(stdout, "created key %d (%s) on plan %s\n", k.ID, k.Prefix, k.Plan)
		fmt.Fprintln(stdout, "its secret, shown only this once (tileapi keeps a hash of it):")
		fmt.Fprintln(stdout, secret)
	case "list":
		ks, err := s.List(ctx)
		if err != nil {
			return fmt.Errorf("keys list: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tPLAN\tCREATED\tREVOKED")
		for _, k := range ks {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, orDash(k.Name), k.Plan, timeOrDash(k.CreatedAt), timeOrDash(k.RevokedAt))
		}
		return tw.Flush()
	case "revoke":
		k, err := s.Revoke(ctx, id)
		if err != nil {
			return fmt.Errorf("keys revoke: %w", err)
		}
		fmt.Fprintf(stdout, "key %d (%s) revoked at %s\n", k.ID, k.Prefix, timeOrDash(k.RevokedAt))
	case "set-plan":
		k, err := s.SetPlan(ctx, id, *plan)
		if err != nil {
			return fmt.Errorf("keys set-plan: %w", err)
		}
		fmt.Fprintf(stdout, "key %d (%s) is on plan %s\n", k.ID, k.Prefix, k.Plan)
	case "override":
		o, err := parseOverrides(pos[1:], *maxInFlight, *clear)
		if err != nil {
			return fmt.Errorf("keys override: %w", err)
		}
		k, err := s.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("keys override: %w", err)
		}
		var stored []byte
		if !o.IsZero() {
			if err := checkOverrides(*plansFile, k.Plan, o); err != nil {
				return fmt.Errorf("keys override: %w", err)
			}
			if stored, err = json.Marshal(o); err != nil {
				return err
			}
		}
		if k, err = s.SetOverrides(ctx, id, stored); err != nil {
			return fmt.Errorf("keys override: %w", err)
		}
		if stored == nil {
			fmt.Fprintf(stdout, "key %d (%s) has no overrides: plan %s alone\n", k.ID, k.Prefix, k.Plan)
			return nil
		}
		fmt.Fprintf(stdout, "key %d (%s): plan %s with overrides %s\n", k.ID, k.Prefix, k.Plan, k.Overrides)
	}
	return nil
}

// parseOverrides reads NAME=MAX/WINDOW arguments ("burst=500/5s") and the
// in-flight flag (-1 when not given) into Overrides; clear asks for none,
// and goes with nothing else.
func parseOverrides(args []string, maxInFlight int, clear bool) (plans.Overrides, error) {
	var o plans.Overrides
	if clear {
		if len(args) > 0 || maxInFlight >= 0 {
			return o, errors.New("-clear goes alone")
		}
		return o, nil
	}
	for _, a := range args {
		name, rest, ok1 := strings.Cut(a, "=")
		maxText, window, ok2 := strings.Cut(rest, "/")
		max, err := strconv.ParseInt(maxText, 10, 64)
		if !ok1 || !ok2 || err != nil {
			return o, fmt.Errorf("limit %q is not NAME=MAX/WINDOW, such as burst=500/5s", a)
		}
		o.Limits = append(o.Limits, plans.FileLimit{Name: name, Max: max, Window: window})
	}
	if maxInFlight >= 0 {
		o.MaxInFlight = &maxInFlight
	}
	if o.IsZero() {
		return o, errors.New("no limit and no -max-in-flight: say what to override, or -clear")
	}
	return o, nil
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
