// Package calibrate measures what requests really cost a spatial backend,
// so that a plan can settle each request on the work it did (see
// cost.WorkModel): it times a sample of radius searches, containment
// queries and tiles around real places, and plots time against price.
package calibrate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/cost"
	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/tiles"
)

// Geofence is the backend whose queries are timed: geofence.PostGIS.
type Geofence interface {
	Within(ctx context.Context, q geofence.WithinQuery) ([]geofence.Near, error)
	Contains(ctx context.Context, q geofence.ContainsQuery) ([]dataset.Fence, error)
}

// Tiles is the renderer whose tiles are timed: tiles.PostGIS.
type Tiles interface {
	Tile(ctx context.Context, l tiles.Layer, t maptile.Tile) ([]byte, error)
}

// Routes are the routes sampled, in the order Run measures them.
var routes = []string{"within", "contains", "places", "countries", "counties"}

// Run measures n requests of each route around places of d drawn with
// seed: searches of 0.5 to 50 km (at most 100 places), containment, and
// tiles of each layer at every zoom of the layer, each priced by m as the
// service prices it up front. A tile's features are not counted, as the
// service does not count them when it settles.
func Run(ctx context.Context, g Geofence, ts Tiles, d *dataset.Dataset, m cost.Model, n int, seed uint64) ([]cost.Sample, error) {
	r := rand.New(rand.NewPCG(seed, 0))
	place := func() dataset.Place { return d.Places[r.IntN(len(d.Places))] }
	var out []cost.Sample
	measure := func(route string, price int64, work func() (int, error)) error {
		start := time.Now()
		features, err := work()
		if err != nil {
			return fmt.Errorf("calibrate: %s: %w", route, err)
		}
		out = append(out, cost.Sample{Route: route, Price: price, MS: float64(time.Since(start).Microseconds()) / 1000, Features: features})
		return nil
	}
	for _, route := range routes {
		for range n {
			p := place()
			var err error
			switch route {
			case "within":
				radius := 500 + r.Float64()*49_500
				q := geofence.WithinQuery{Lng: p.Point[0], Lat: p.Point[1], Radius: radius, Limit: 100}
				err = measure(route, m.Radius(radius), func() (int, error) {
					ns, err := g.Within(ctx, q)
					return len(ns), err
				})
			case "contains":
				q := geofence.ContainsQuery{Lng: p.Point[0], Lat: p.Point[1]}
				err = measure(route, m.Flat, func() (int, error) {
					fs, err := g.Contains(ctx, q)
					return len(fs), err
				})
			default:
				l, lerr := tiles.LookupLayer(route)
				if lerr != nil {
					return nil, lerr
				}
				z := maptile.Zoom(l.MinZoom + r.IntN(l.MaxZoom-l.MinZoom+1))
				t := maptile.At(p.Point, z)
				err = measure(route, m.Tile(l.Name, int(z)), func() (int, error) {
					_, err := ts.Tile(ctx, l, t)
					return 0, err
				})
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
