package usage

import (
	"cmp"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot writes to path (PNG or SVG, by its extension) the units as settled
// of rows, the answer of q, per hour or day: a line per route or layer as
// q groups them, else one for all.
func Plot(path string, q Query, rows []Row) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("units as settled per %s, %s to %s", q.By, q.From.Format("2006-01-02 15:04"), q.To.Format("2006-01-02 15:04 MST"))
	p.X.Label.Text = "UTC"
	p.Y.Label.Text = "units"
	p.X.Tick.Marker = plot.TimeTicks{Format: "01-02\n15:04"}
	series := make(map[string]map[int64]float64)
	for _, r := range rows {
		name := cmp.Or(r.Layer, r.Route, "all")
		if r.Layer != "" {
			name = r.Route + " " + r.Layer
		}
		if series[name] == nil {
			series[name] = make(map[int64]float64)
		}
		series[name][r.Start.Unix()] += float64(r.Settled())
	}
	names := make([]string, 0, len(series))
	for name := range series {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		var xys plotter.XYs
		for t, u := range series[name] {
			xys = append(xys, plotter.XY{X: float64(t), Y: u})
		}
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("usage: plot: %w", err)
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		p.Add(line, points)
		p.Legend.Add(name, line)
	}
	if err := p.Save(9*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("usage: plot: %w", err)
	}
	return nil
}
