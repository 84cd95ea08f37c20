package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/tiles"
)

// runPlans prints every plan with its limits and what requests cost under
// it, so an operator can see a plans file's effect before serving it.
func runPlans(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plans", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("plans-file", getenv("TILEAPI_PLANS_FILE"), "JSON file of plans replacing or adding to the defaults ($TILEAPI_PLANS_FILE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ps, err := loadPlans(*file)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "plan\tlimits\tmax radius\tlargest affordable radius\tin flight")
	for _, p := range ps.All() {
		var limits []string
		for _, l := range p.Quota.Limits {
			limits = append(limits, l.String())
		}
		inFlight := "no limit"
		if p.MaxInFlight > 0 {
			inFlight = strconv.Itoa(p.MaxInFlight)
		}
		fmt.Fprintf(w, "%s\t%s\t%g m\t%g m\t%s\n", p.Name, strings.Join(limits, ", "), p.MaxRadius, p.Cost.LargestRadius(p.Quota.MaxCost()), inFlight)
	}
	fmt.Fprintln(w)

	radii := []float64{1000, 2000, 5000, 10_000, 20_000, 50_000}
	fmt.Fprint(w, "radius search cost (units)")
	for _, r := range radii {
		fmt.Fprintf(w, "\t%g km", r/1000)
	}
	fmt.Fprintln(w)
	for _, p := range ps.All() {
		fmt.Fprint(w, p.Name)
		for _, r := range radii {
			fmt.Fprintf(w, "\t%d", p.Cost.Radius(r))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)

	zooms := []int{0, 2, 4, 6, 8, 9, 10, 12, 14}
	fmt.Fprint(w, "tile cost, miss/hit (units)")
	for _, z := range zooms {
		fmt.Fprintf(w, "\tz%d", z)
	}
	fmt.Fprintln(w)
	for _, p := range ps.All() {
		for _, l := range tiles.Layers() {
			fmt.Fprintf(w, "%s %s", p.Name, l.Name)
			for _, z := range zooms {
				if z < l.MinZoom || z > l.MaxZoom {
					fmt.Fprint(w, "\t-")
					continue
				}
				fmt.Fprintf(w, "\t%d/%d", p.Cost.Tile(l.Name, z), p.Cost.CachedTile(l.Name, z))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\ncontains, TileJSON, catalog: %d unit; /v1/quota, /healthz, /readyz, /metrics: not charged\n", ps.All()[0].Cost.Flat)
	return w.Flush()
}

// loadPlans loads the plans (see plans.Load) and refuses those that price
// tiles of a layer the server does not have.
func loadPlans(path string) (plans.Set, error) {
	ps, err := plans.Load(path)
	if err != nil {
		return plans.Set{}, err
	}
	return ps, ps.CheckLayers(tiles.LayerNames(), []string{geofence.PlacesSet, geofence.BoundariesSet})
}
