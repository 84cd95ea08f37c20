package loadtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteExactnessTable writes one row per key and limit, and the problems of
// any key that failed.
func WriteExactnessTable(w io.Writer, r *ExactnessReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "key\trequests\t200\tunits\t429\tunits\t503\tlogged\tunits\tlimit\tmax\tpeak\tover\tdenied\tverdict\t")
	for _, k := range r.Keys {
		verdict := "PASS"
		if !k.OK {
			verdict = "FAIL"
		}
		for i, l := range k.Limits {
			lim := fmt.Sprintf("%s/%v", l.Limit.Name, l.Limit.Window)
			if i == 0 {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t\n", k.Key.ID, k.Requests, k.Admitted, k.AdmittedCost,
					k.Denied, k.DeniedCost, k.Unavailable, k.LogEntries, k.LogCost, lim, l.Limit.Max, l.Peak, l.Violations, l.Denied, verdict)
				continue
			}
			fmt.Fprintf(tw, "\t\t\t\t\t\t\t\t\t%s\t%d\t%d\t%d\t%d\t\t\n", lim, l.Limit.Max, l.Peak, l.Violations, l.Denied)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "PASS: no key was admitted more than a limit in any trailing window"
	if !r.OK {
		verdict = "FAIL"
	}
	for _, k := range r.Keys {
		for _, p := range k.Problems {
			fmt.Fprintf(w, "key %d: %s\n", k.Key.ID, p)
		}
	}
	_, err := fmt.Fprintf(w, "%s (%d targets, %d keys, %d clients per key, %d requests in %v)\n",
		verdict, r.Targets, len(r.Keys), r.ClientsPerKey, r.Requests, time.Duration(r.End-r.Start)*time.Microsecond)
	return err
}

// WriteThroughputTable writes one row per setup and route, then the
// overhead of each setup over the baseline.
func WriteThroughputTable(w io.Writer, r *ThroughputReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\troute\trequests\terrors\treq/s\tp50 ms\tp95 ms\tp99 ms\tmax ms\t")
	for _, s := range r.Stats {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", s.Setup, s.Route, s.Requests, s.Errors, s.RPS, ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
	}
	if len(r.Overhead) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t")
		fmt.Fprintln(tw, "setup\troute\treq/s ratio\tp50 ratio\tp99 ratio\t\t\t\t\t")
		for _, o := range r.Overhead {
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t\t\t\t\t\n", o.Setup, o.Route, o.RPS, o.P50, o.P99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Overhead) > 0 {
		_, err := fmt.Fprintf(w, "ratios: baseline (%s) req/s over the setup's; the setup's latency over the baseline's\n", strings.TrimSpace(r.Stats[0].Setup))
		return err
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
