package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	usagehist "github.com/tileapi/tileapi/internal/usage"
)

// runUsage prints the usage history of a key, a customer's keys, or
// everyone, from PostgreSQL, and plots it with -plot; tileapi usage
// export writes it for a billing system (runUsageExport).
func runUsage(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "export" {
		return runUsageExport(ctx, args[1:], getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("usage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	var q usagehist.Query
	fs.Int64Var(&q.KeyID, "key", 0, "the key's `ID` (default: every key)")
	fs.Int64Var(&q.CustomerID, "customer", 0, "the customer's `ID`: its keys (default: every customer)")
	from := fs.String("from", "", "start of the span, RFC 3339 (default: a day, or 30 days by day, before -to)")
	to := fs.String("to", "", "end of the span, RFC 3339 (default: now)")
	fs.StringVar(&q.By, "by", usagehist.ByHour, "sum per hour or day")
	fs.StringVar(&q.Group, "group", "", "sum per route, layer, or neither (empty)")
	plotPath := fs.String("plot", "", "also write a chart of the units as settled to this PNG or SVG file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, t := range []struct {
		s   string
		dst *time.Time
	}{{*from, &q.From}, {*to, &q.To}} {
		if t.s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.s)
		if err != nil {
			return fmt.Errorf("usage: %w", err)
		}
		*t.dst = v.UTC()
	}
	q.Fill(time.Now())
	pool, _, err := connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	defer pool.Close()
	rows, err := usagehist.NewPostgres(pool).Usage(ctx, q)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "start\tidentity\troute\tlayer\trequests\tcharged\tgiven back\tsettled\toverage\tunmetered\t429\t422\t")
	var total usagehist.Row
	for _, r := range rows {
		total.Add(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Start.Format(time.RFC3339), r.Identity, r.Route, r.Layer,
			r.Requests, r.Charged, r.GivenBack, r.Settled(), r.Overage, r.Unmetered, r.Refused429, r.Refused422)
	}
	fmt.Fprintf(tw, "total\t\t\t\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
		total.Requests, total.Charged, total.GivenBack, total.Settled(), total.Overage, total.Unmetered, total.Refused429, total.Refused422)
	if err := tw.Flush(); err != nil {
		return err
	}
	if *plotPath != "" {
		return usagehist.Plot(*plotPath, q, rows)
	}
	return nil
}
