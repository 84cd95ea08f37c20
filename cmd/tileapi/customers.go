package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/quota"
)

const customersUsage = `tileapi customers create -name NAME -plan PLAN | list | set-plan ID PLAN | rename ID NAME | usage ID
  [-database-url URL] [-plans-file FILE]
  usage reads the quotas in Redis: -redis-url URL ($REDIS_URL), -redis-prefix ($TILEAPI_REDIS_PREFIX)
  a key joins a customer with tileapi keys create -customer ID, or keys set-customer KEY_ID ID`

// runCustomers manages the customers in the database: a customer's plan
// is one budget that every request of any of its keys must fit too.
func runCustomers(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runActions(ctx, "customers", customersUsage, customersActions, args, getenv, stdout, stderr)
}

var customersActions = map[string]action{
	"create": {args: 0, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		name := fs.String("name", "", "the customer's name, for people (required)")
		plan := fs.String("plan", "", "the customer's plan, which all its keys share (required)")
		plansFile := plansFlag(fs, getenv)
		return func(int64, []string) (work, error) {
			if strings.TrimSpace(*name) == "" {
				return nil, errors.New("-name is required")
			}
			if err := checkCustomerPlan(*plansFile, *plan); err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				c, err := s.CreateCustomer(ctx, *name, *plan)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "created customer %d (%s) on plan %s\n", c.ID, c.Name, c.Plan)
				return nil
			}, nil
		}
	}},
	"list": {args: 0, flags: func(*flag.FlagSet, func(string) string) func(int64, []string) (work, error) {
		return func(int64, []string) (work, error) {
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				cs, err := s.ListCustomers(ctx)
				if err != nil {
					return err
				}
				ks, err := s.List(ctx)
				if err != nil {
					return err
				}
				count := make(map[int64]int)
				for _, k := range ks {
					count[k.CustomerID]++
				}
				tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tPLAN\tKEYS\tCREATED")
				for _, c := range cs {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", c.ID, c.Name, c.Plan, count[c.ID], timeOrDash(c.CreatedAt))
				}
				return tw.Flush()
			}, nil
		}
	}},
	"set-plan": {args: 2, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		plansFile := plansFlag(fs, getenv)
		return func(id int64, pos []string) (work, error) {
			plan := pos[1]
			if err := checkCustomerPlan(*plansFile, plan); err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				c, err := s.SetCustomerPlan(ctx, id, plan)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "customer %d (%s) is on plan %s\n", c.ID, c.Name, c.Plan)
				return nil
			}, nil
		}
	}},
	"rename": {args: 2, flags: func(*flag.FlagSet, func(string) string) func(int64, []string) (work, error) {
		return func(id int64, pos []string) (work, error) {
			name := pos[1]
			if strings.TrimSpace(name) == "" {
				return nil, errors.New("the name is empty")
			}
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				c, err := s.RenameCustomer(ctx, id, name)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "customer %d is %s\n", c.ID, c.Name)
				return nil
			}, nil
		}
	}},
	"usage": {args: 1, flags: func(fs *flag.FlagSet, getenv func(string) string) func(int64, []string) (work, error) {
		q := quotaFlags(fs, getenv)
		return func(id int64, _ []string) (work, error) {
			return func(ctx context.Context, s *keys.Postgres, stdout io.Writer) error {
				ps, err := loadPlans(*q.plansFile)
				if err != nil {
					return err
				}
				store, done, err := q.open()
				if err != nil {
					return err
				}
				defer done()
				return customerUsage(ctx, s, store, ps, id, stdout)
			}, nil
		}
	}},
}

// customerUsage prints customer id's usage of each limit of its plan,
// all its keys' together, as GET /admin/customers/{id} reads it.
func customerUsage(ctx context.Context, s *keys.Postgres, store quota.Store, ps plans.Set, id int64, stdout io.Writer) error {
	c, err := s.GetCustomer(ctx, id)
	if err != nil {
		return err
	}
	q, err := ps.CustomerPlan(c.Plan)
	if err != nil {
		return err
	}
	d, err := store.Peek(ctx, httpapi.CustomerIdentity(c.ID), q)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "customer %d (%s) on plan %s\n", c.ID, c.Name, c.Plan)
	return printUsage(stdout, d)
}

// checkCustomerPlan returns an error naming the plans a customer may be on
// unless the plans of plansFile (the defaults where it is empty) include
// plan.
func checkCustomerPlan(plansFile, plan string) error {
	ps, err := loadPlans(plansFile)
	if err != nil {
		return err
	}
	_, err = ps.CustomerPlan(plan)
	return err
}
