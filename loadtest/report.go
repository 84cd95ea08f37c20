package loadtest

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
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
// overhead of each setup over the baseline, and how each tileapi setup
// compares with any other tile server.
func WriteThroughputTable(w io.Writer, r *ThroughputReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\troute\trequests\terrors\treq/s\tp50 ms\tp95 ms\tp99 ms\tmax ms\tbytes\t")
	for _, s := range r.Stats {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%.0f\t\n", s.Setup, s.Route, s.Requests, s.Errors, s.RPS, ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max), s.Bytes)
	}
	if len(r.Overhead) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t")
		fmt.Fprintln(tw, "setup\troute\treq/s ratio\tp50 ratio\tp99 ratio\t\t\t\t\t\t")
		for _, o := range r.Overhead {
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t\t\t\t\t\t\n", o.Setup, o.Route, o.RPS, o.P50, o.P99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Overhead) > 0 {
		if _, err := fmt.Fprintf(w, "ratios: baseline (%s) req/s over the setup's; the setup's latency over the baseline's\n", strings.TrimSpace(r.Stats[0].Setup)); err != nil {
			return err
		}
	}
	for _, x := range r.Ratios {
		if _, err := fmt.Fprintf(w, "%s: %s served %.2fx the req/s of %s\n", x.Route, x.Setup, x.RPS, x.Versus); err != nil {
			return err
		}
	}
	return nil
}

// WriteThroughputMarkdown writes r as a Markdown table for docs/benchmarks.md: a
// row per route, with each setup's req/s, p50 and p99, then each ratio of
// req/s (a setup's over another's: above 1 is faster); then a line of
// the mean tile sizes, and one of each setup's table layer misses over
// its places misses.
func WriteThroughputMarkdown(w io.Writer, r *ThroughputReport) error {
	setups, routes, stats := r.bySetupAndRoute()
	type pair struct{ setup, versus string }
	var pairs []pair
	ratios := map[string]float64{}
	for _, x := range r.Ratios {
		p := pair{x.Setup, x.Versus}
		if !slices.Contains(pairs, p) {
			pairs = append(pairs, p)
		}
		ratios[x.Route+"\x00"+x.Setup+"\x00"+x.Versus] = x.RPS
	}
	var b strings.Builder
	b.WriteString("| route |")
	sep := "| --- |"
	for _, s := range setups {
		fmt.Fprintf(&b, " %s req/s | p50 ms | p99 ms |", s)
		sep += " ---: | ---: | ---: |"
	}
	for _, p := range pairs {
		fmt.Fprintf(&b, " %s / %s |", p.setup, p.versus)
		sep += " ---: |"
	}
	b.WriteString("\n" + sep + "\n")
	for _, rt := range routes {
		fmt.Fprintf(&b, "| %s |", rt)
		for _, s := range setups {
			if st, ok := stats[[2]string{s, rt}]; ok {
				fmt.Fprintf(&b, " %s | %s | %s |", thousands(st.RPS), ms(st.P50), ms(st.P99))
			} else {
				b.WriteString(" | | |")
			}
		}
		for _, p := range pairs {
			if x, ok := ratios[rt+"\x00"+p.setup+"\x00"+p.versus]; ok {
				fmt.Fprintf(&b, " %.2fx |", x)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	var perRoute []string
	for _, rt := range []string{RouteTileMiss, RouteTableMiss} {
		var sizes []string
		for _, s := range setups {
			if st, ok := stats[[2]string{s, rt}]; ok {
				sizes = append(sizes, fmt.Sprintf("%s %.0f", s, st.Bytes))
			}
		}
		if len(sizes) > 0 {
			perRoute = append(perRoute, fmt.Sprintf("%s: %s", rt, strings.Join(sizes, ", ")))
		}
	}
	if len(perRoute) > 0 {
		fmt.Fprintf(&b, "\nBytes per tile (uncompressed, mean over the run), %s.\n", strings.Join(perRoute, "; "))
	}
	// The table layer against the places layer it redraws, in each setup.
	var table []string
	for _, s := range setups {
		tm, ok1 := stats[[2]string{s, RouteTableMiss}]
		pm, ok2 := stats[[2]string{s, RouteTileMiss}]
		if ok1 && ok2 && pm.RPS > 0 && pm.P50 > 0 && pm.P99 > 0 {
			table = append(table, fmt.Sprintf("%s %.2fx the req/s (p50 %.2fx, p99 %.2fx)", s, tm.RPS/pm.RPS, float64(tm.P50)/float64(pm.P50), float64(tm.P99)/float64(pm.P99)))
		}
	}
	if len(table) > 0 {
		fmt.Fprintf(&b, "\n%s over %s: %s.\n", RouteTableMiss, RouteTileMiss, strings.Join(table, ", "))
	}
	var failed []string
	for _, st := range r.Stats {
		if st.Errors > 0 {
			failed = append(failed, fmt.Sprintf("%s %s %d of %d", st.Setup, st.Route, st.Errors, st.Requests))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nAnswers other than 200, counted in req/s but not in the latencies: %s.\n", strings.Join(failed, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// thousands formats x rounded, with commas between thousands.
func thousands(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// bySetupAndRoute returns r's setups and routes in the order the run met
// them, and each setup's stats on each route it served.
func (r *ThroughputReport) bySetupAndRoute() (setups, routes []string, stats map[[2]string]RouteStats) {
	stats = map[[2]string]RouteStats{}
	for _, st := range r.Stats {
		if !slices.Contains(setups, st.Setup) {
			setups = append(setups, st.Setup)
		}
		if !slices.Contains(routes, st.Route) {
			routes = append(routes, st.Route)
		}
		stats[[2]string{st.Setup, st.Route}] = st
	}
	return setups, routes, stats
}

// WriteQuotaMarkdown writes, for the steps reps (one client count each), a
// Markdown table of what the quota did on each setup and route, and on
// each setup's routes together (RouteAll): the share of requests denied
// (429), served unmetered and refused for the quota's time budget (503
// quota-unavailable), the charges tried again for coming late to Redis
// (where the server's metrics were read), and, where the setup's Redis was
// read, its reads and commands per request, by command.
func WriteQuotaMarkdown(w io.Writer, reps []*ThroughputReport) error {
	var b strings.Builder
	b.WriteString("| clients | setup | route | req/s | 429 | unmetered | budget 503 | late, tried again | Redis reads / req | commands / req | by command |\n")
	b.WriteString("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	share := func(n, of int) string { return fmt.Sprintf("%.3f%%", 100*float64(n)/float64(max(of, 1))) }
	for _, r := range reps {
		for _, st := range append(slices.Clone(r.Stats), r.allRoutes()...) {
			reads, total, by := "", "", ""
			if u := st.Redis; u != nil {
				reads, total, by = fmt.Sprintf("%.2f", u.Reads), fmt.Sprintf("%.2f", u.Total), commandList(u.Commands)
			}
			late := ""
			if st.LateRetries >= 0 {
				late = share(st.LateRetries, st.Requests)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Clients, st.Setup, st.Route, thousands(st.RPS),
				share(st.Denied, st.Requests), share(st.Unmetered, st.Requests), share(st.Budget, st.Requests), late, reads, total, by)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RouteAll names the stats of a setup's routes together.
const RouteAll = "all routes"

// allRoutes sums each tileapi setup's routes of r: its requests over the
// time they took, its answers, and what Redis did, weighted by requests.
func (r *ThroughputReport) allRoutes() []RouteStats {
	var out []RouteStats
	for _, s := range r.Stats {
		i := slices.IndexFunc(out, func(o RouteStats) bool { return o.Setup == s.Setup })
		if i < 0 {
			out, i = append(out, RouteStats{Setup: s.Setup, Route: RouteAll}), len(out)
		}
		o := &out[i]
		o.Requests, o.Errors, o.Elapsed = o.Requests+s.Requests, o.Errors+s.Errors, o.Elapsed+s.Elapsed
		o.Denied, o.Unmetered, o.Budget = o.Denied+s.Denied, o.Unmetered+s.Unmetered, o.Budget+s.Budget
		if s.LateRetries < 0 || o.LateRetries < 0 {
			o.LateRetries = -1 // unknown on one route: unknown in all
		} else {
			o.LateRetries += s.LateRetries
		}
		if u := s.Redis; u != nil {
			if o.Redis == nil {
				o.Redis = &RedisUse{Commands: map[string]float64{}}
			}
			n := float64(s.Requests)
			o.Redis.Reads, o.Redis.Total = o.Redis.Reads+u.Reads*n, o.Redis.Total+u.Total*n
			for c, calls := range u.Commands {
				o.Redis.Commands[c] += calls * n
			}
		}
	}
	for i := range out {
		o := &out[i]
		o.RPS = float64(o.Requests) / o.Elapsed.Seconds()
		if u, n := o.Redis, float64(max(o.Requests, 1)); u != nil {
			u.Reads, u.Total = u.Reads/n, u.Total/n
			for c := range u.Commands {
				u.Commands[c] /= n
			}
		}
	}
	return out
}

// commandList is "fcall 1.00, get 1.00, ...": the commands called at
// least once in a hundred requests, the most called first.
func commandList(calls map[string]float64) string {
	names := slices.Collect(maps.Keys(calls))
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(calls[b], calls[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, n := range names {
		if calls[n] >= 0.01 {
			out = append(out, fmt.Sprintf("%s %.2f", n, calls[n]))
		}
	}
	return strings.Join(out, ", ")
}

// RatioSummary sums up the req/s ratios of setup over versus in every
// step of reps, route by route, whichever of the two was the baseline:
// their geometric mean, lowest and highest, and how many there were.
func RatioSummary(reps []*ThroughputReport, setup, versus string) (mean, lo, hi float64, n int) {
	var logs float64
	lo = math.Inf(1)
	for _, r := range reps {
		for _, x := range r.Ratios {
			ratio := x.RPS
			switch {
			case x.Setup == setup && x.Versus == versus:
			case x.Setup == versus && x.Versus == setup:
				ratio = 1 / ratio
			default:
				continue
			}
			logs += math.Log(ratio)
			lo, hi = min(lo, ratio), max(hi, ratio)
			n++
		}
	}
	if n == 0 {
		return 0, 0, 0, 0
	}
	return math.Exp(logs / float64(n)), lo, hi, n
}

// WriteCPUMarkdown writes, for the steps reps, a Markdown table of the CPU
// time a request took in each process on its path (RouteStats.CPU), a row
// for each client count, route and setup, the mean over the steps of that
// client count: its server's, PostgreSQL's backends', Redis's and the load
// tool's, their total, and versus's total over it on the same route, which
// is what this setup's req/s over versus's would be on a machine that ran
// nothing else. Steps without CPU times add no rows.
func WriteCPUMarkdown(w io.Writer, reps []*ThroughputReport, versus string) error {
	type key struct {
		clients      int
		route, setup string
	}
	var keys []key
	sums := map[key]map[string]time.Duration{}
	steps := map[key]int{}
	for _, r := range reps {
		for _, st := range r.Stats {
			if st.CPU == nil {
				continue
			}
			k := key{r.Clients, st.Route, st.Setup}
			if sums[k] == nil {
				keys, sums[k] = append(keys, k), map[string]time.Duration{}
			}
			steps[k]++
			for p, t := range st.CPU {
				sums[k][p] += t
			}
		}
	}
	if len(keys) == 0 {
		return errors.New("loadtest: no CPU time measured")
	}
	slices.SortStableFunc(keys, func(a, b key) int { return a.clients - b.clients })
	mean := func(k key, p string) float64 {
		return float64(sums[k][p]) / float64(steps[k]) / float64(time.Millisecond)
	}
	total := func(k key) float64 {
		return mean(k, CPUServer) + mean(k, CPUPostgres) + mean(k, CPURedis) + mean(k, CPULoadTool)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| clients | route | setup | server | PostgreSQL | Redis | load tool | total | %s's total over this |\n", versus)
	b.WriteString("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, k := range keys {
		ratio := ""
		if ref := (key{k.clients, k.route, versus}); k.setup != versus && sums[ref] != nil {
			ratio = fmt.Sprintf("%.2fx", total(ref)/total(k))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", k.clients, k.route, k.setup,
			mean(k, CPUServer), mean(k, CPUPostgres), mean(k, CPURedis), mean(k, CPULoadTool), total(k), ratio)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
