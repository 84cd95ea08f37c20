package loadtest

import (
	"fmt"
	"image/color"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotKey draws, for the key-th key of r, the units admitted in the
// trailing window of each limit (from the Redis log) against that limit's
// max, and below it the units denied in the trailing window of the shortest
// limit (as the clients timed the 429s), over the run; it writes a PNG to
// path.
func PlotKey(path string, r *ExactnessReport, key int) error {
	k := r.Keys[key]
	step := max((r.End-r.Start)/1000, 1000)
	xy := func(sums []int64) plotter.XYs {
		pts := make(plotter.XYs, len(sums))
		for i, s := range sums {
			pts[i].X, pts[i].Y = float64(int64(i)*step)/1e6, float64(s)
		}
		return pts
	}
	end := float64(r.End-r.Start) / 1e6

	admitted := plot.New()
	admitted.Title.Text = fmt.Sprintf("key %d: %d servers, %d clients, admitted units (Redis log) against each limit", k.Key.ID, r.Targets, r.ClientsPerKey)
	admitted.Y.Label.Text = "admitted units in the window"
	admitted.Legend.Top, admitted.Legend.Left = true, true
	admitted.Y.Min = 0
	shortest := k.Limits[0].Limit
	for i, l := range k.Limits {
		if l.Limit.Window < shortest.Window {
			shortest = l.Limit
		}
		c := plotutil.Color(i)
		line, err := plotter.NewLine(xy(TrailingSums(k.Admissions, l.Limit.Window, r.Start, r.End, step)))
		if err != nil {
			return err
		}
		line.Color, line.Width = c, vg.Points(1)
		maxLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(l.Limit.Max)}, {X: end, Y: float64(l.Limit.Max)}})
		if err != nil {
			return err
		}
		maxLine.Color, maxLine.Width, maxLine.Dashes = c, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
		admitted.Add(line, maxLine)
		admitted.Legend.Add(fmt.Sprintf("admitted in the trailing %v (%s)", l.Limit.Window, l.Limit.Name), line)
		admitted.Legend.Add(fmt.Sprintf("max %d per %v", l.Limit.Max, l.Limit.Window), maxLine)
		admitted.Y.Max = max(admitted.Y.Max, float64(l.Limit.Max)*1.6) // room for the legend
	}

	denied := plot.New()
	denied.X.Label.Text = "seconds since the start"
	denied.Y.Label.Text = fmt.Sprintf("denied units per %v", shortest.Window)
	line, err := plotter.NewLine(xy(TrailingSums(k.Denials, shortest.Window, r.Start, r.End, step)))
	if err != nil {
		return err
	}
	line.Color, line.Width = color.Gray{Y: 110}, vg.Points(1)
	denied.Add(line)
	denied.Y.Min = 0
	admitted.X.Min, admitted.X.Max, denied.X.Min, denied.X.Max = 0, end, 0, end

	img := vgimg.New(9*vg.Inch, 6*vg.Inch)
	dc := draw.New(img)
	canvases := plot.Align([][]*plot.Plot{{admitted}, {denied}}, draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}, dc)
	admitted.Draw(canvases[0][0])
	denied.Draw(canvases[1][0])
	return savePNG(path, img)
}

func savePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PlotLatency draws the latency distribution (the share of requests
// answered within a time, on a log scale) of every setup and route of r,
// and writes a PNG to path.
func PlotLatency(path string, r *ThroughputReport) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("latency, %d clients", r.Clients)
	p.X.Label.Text = "ms (log scale)"
	p.Y.Label.Text = "share of requests answered within"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.Y.Max = 0, 1
	routes := map[string]int{}
	setups := map[string]int{}
	for _, s := range r.Stats {
		if len(s.Latencies) == 0 {
			continue
		}
		if _, ok := routes[s.Route]; !ok {
			routes[s.Route] = len(routes)
		}
		if _, ok := setups[s.Setup]; !ok {
			setups[s.Setup] = len(setups)
		}
		// At most 500 points of the empirical distribution.
		n := len(s.Latencies)
		pts := make(plotter.XYs, 0, 500)
		for i := 0; i < n; i += max(1, n/500) {
			pts = append(pts, plotter.XY{X: max(float64(s.Latencies[i])/float64(time.Millisecond), 0.001), Y: float64(i+1) / float64(n)})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color, line.Width = plotutil.Color(routes[s.Route]), vg.Points(1.2)
		line.Dashes = plotutil.Dashes(setups[s.Setup])
		p.Add(line)
		p.Legend.Add(s.Setup+": "+s.Route, line)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// PlotRPS draws the requests per second of every setup on every route of r
// as groups of bars, one group per route, and writes a PNG to path.
func PlotRPS(path string, r *ThroughputReport) error {
	setups, routes, stats := r.bySetupAndRoute()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("requests per second, %d clients", r.Clients)
	p.Y.Label.Text = "req/s"
	p.Legend.Top = true
	width := vg.Points(22)
	most := 0.0
	for i, s := range setups {
		values := make(plotter.Values, len(routes))
		for j, rt := range routes {
			values[j] = stats[[2]string{s, rt}].RPS // 0 where the setup does not serve the route
			most = max(most, values[j])
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.Color, bars.LineStyle.Width = plotutil.Color(i), 0
		bars.Offset = width * vg.Length(2*i-len(setups)+1) / 2
		p.Add(bars)
		p.Legend.Add(s, bars)
	}
	p.NominalX(routes...)
	p.X.Min, p.X.Max = -0.5, float64(len(routes))-0.5
	p.Y.Min, p.Y.Max = 0, most*1.25 // room for the legend
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
