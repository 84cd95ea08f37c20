package calibrate

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tileapi/tileapi/cost"
)

// Plot writes to path (PNG or SVG, by its extension) the time each sample
// took against its price up front, a colour a route, on log scales, with
// the price the fitted model w gives a request by its time alone.
func Plot(path string, samples []cost.Sample, w cost.WorkModel) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("measured query time against price; fit: %.3g units per ms + %.3g per feature", w.PerMS, w.PerFeature)
	p.X.Label.Text = "query time (ms, log)"
	p.Y.Label.Text = "price up front (units, log)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	lo, hi := math.Inf(1), 0.0
	for i, route := range routes {
		var xys plotter.XYs
		for _, s := range samples {
			if s.Route == route {
				ms := max(s.MS, 0.01) // a log scale has no zero
				xys = append(xys, plotter.XY{X: ms, Y: float64(s.Price)})
				lo, hi = min(lo, ms), max(hi, ms)
			}
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.Color, sc.Shape, sc.Radius = plotutil.Color(i), draw.CircleGlyph{}, vg.Points(2)
		p.Add(sc)
		p.Legend.Add(route, sc)
	}
	if w.PerMS > 0 && hi > 0 {
		var fit plotter.XYs
		for x := lo; x <= hi*1.01; x *= 1.2 {
			fit = append(fit, plotter.XY{X: x, Y: max(1, w.PerMS*x)})
		}
		line, err := plotter.NewLine(fit)
		if err != nil {
			return err
		}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line)
		p.Legend.Add("fit, no features", line)
	}
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}
