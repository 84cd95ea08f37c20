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
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/tiles"
)

// runPlans prints every plan with its limits and what requests cost under
// it, so an operator can see a plans file's effect before serving it.
func runPlans(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plans", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("plans-file", getenv("TILEAPI_PLANS_FILE"), "JSON file of plans replacing or adding to the defaults ($TILEAPI_PLANS_FILE)")
	layersFile := fs.String("layers-file", getenv("TILEAPI_LAYERS_FILE"), "YAML or JSON `file` of your own layers and geofence sets, whose prices are shown beside the bundled ones' ($TILEAPI_LAYERS_FILE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ps, err := loadPlans(*file)
	if err != nil {
		return err
	}
	layerZooms, sets, err := staticCatalog(*layersFile)
	if err != nil {
		return err
	}
	if err := ps.CheckLayers(layerNames(layerZooms), sets); err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "plan\tlimits\tmax radius\tlargest affordable radius\tin flight\talerts")
	for _, p := range ps.All() {
		var limits []string
		for _, l := range p.Quota.Limits {
			limits = append(limits, l.String())
		}
		inFlight := "no limit"
		if p.MaxInFlight > 0 {
			inFlight = strconv.Itoa(p.MaxInFlight)
		}
		fmt.Fprintf(w, "%s\t%s\t%g m\t%g m\t%s\t%s\n", p.Name, strings.Join(limits, ", "), p.MaxRadius, p.Cost.LargestRadius(p.Quota.MaxCost()), inFlight, p.Alerts)
	}
	if names := ps.NoInFlightLimit(); len(names) > 0 {
		fmt.Fprintf(w, "%s: %s\n", noInFlightLimit, strings.Join(names, ", "))
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
		for _, l := range layerZooms {
			fmt.Fprintf(w, "%s %s", p.Name, l.name)
			for i, z := range zooms {
				switch {
				case !p.Cost.SellsLayer(l.name) && i == 0:
					fmt.Fprint(w, "\tnot in plan")
				case !p.Cost.SellsLayer(l.name):
					fmt.Fprint(w, "\t")
				case z < l.minZoom || z > l.maxZoom:
					fmt.Fprint(w, "\t-")
				default:
					fmt.Fprintf(w, "\t%d/%d", p.Cost.Tile(l.name, z), p.Cost.CachedTile(l.name, z))
				}
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)

	fmt.Fprint(w, "geofence set cost (units)\twithin 1 km\twithin 10 km\tcontains")
	fmt.Fprintln(w)
	for _, p := range ps.All() {
		for _, set := range sets {
			m, ok := p.Cost.ForSet(set)
			if !ok {
				fmt.Fprintf(w, "%s %s\tnot in plan\t\t\n", p.Name, set)
				continue
			}
			fmt.Fprintf(w, "%s %s\t%d\t%d\t%d\n", p.Name, set, m.Radius(1000), m.Radius(10_000), m.Flat)
		}
	}
	fmt.Fprintf(w, "\nTileJSON, catalogs: %d unit; /v1/quota, /healthz, /readyz, /metrics: not charged\n", ps.All()[0].Cost.Flat)
	return w.Flush()
}

// noInFlightLimit is what tileapi plans and serve say of the key plans
// without max_in_flight (plans.Set.NoInFlightLimit).
const noInFlightLimit = "key plans without max_in_flight: a killed server's charges for their requests it had in flight are bounded only by its connection cap (max_conns)"

// layerZoom is a layer's name and zoom range, as the layers file says.
type layerZoom struct {
	name             string
	minZoom, maxZoom int
}

// staticCatalog returns the bundled layers and those of the layers file
// at path (zooms as the file gives them, an archive's own where it gives
// none), and the sets' names, without opening a source.
func staticCatalog(path string) ([]layerZoom, []string, error) {
	var ls []layerZoom
	for _, l := range tiles.Layers() {
		ls = append(ls, layerZoom{l.Name, l.MinZoom, l.MaxZoom})
	}
	sets := []string{geofence.PlacesSet, geofence.BoundariesSet}
	if path == "" {
		return ls, sets, nil
	}
	f, err := layers.Load(path)
	if err != nil {
		return nil, nil, err
	}
	if err := f.Check(append(tiles.LayerNames(), sets...)); err != nil {
		return nil, nil, fmt.Errorf("layers: %s: %w", path, err)
	}
	for _, l := range f.Layers {
		minZoom, maxZoom := l.Zooms()
		ls = append(ls, layerZoom{l.Name, minZoom, maxZoom})
	}
	for _, s := range f.Geofences {
		sets = append(sets, s.Name)
	}
	return ls, sets, nil
}

func layerNames(ls []layerZoom) []string {
	ns := make([]string, len(ls))
	for i, l := range ls {
		ns[i] = l.name
	}
	return ns
}

// loadPlans loads the plans (see plans.Load). What they price is checked
// against the layers and sets served once those are open (serve), or read
// (tileapi plans).
func loadPlans(path string) (plans.Set, error) {
	return plans.Load(path)
}
