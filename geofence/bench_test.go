package geofence

import (
	"context"
	"fmt"
	"testing"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

// Benchmark points: central Paris has about 450 places within 25 km; Alice
// Springs has a handful within 100 km.
var (
	dense  = [2]float64{2.3488, 48.85341}
	sparse = [2]float64{133.88, -23.70}
)

func BenchmarkWithin(b *testing.B) {
	ctx := context.Background()
	for name, be := range backends(b) {
		for _, at := range []struct {
			name string
			p    [2]float64
		}{{"dense", dense}, {"sparse", sparse}} {
			for _, km := range []float64{1, 5, 25, 100} {
				b.Run(fmt.Sprintf("%s/%s/%gkm", name, at.name, km), func(b *testing.B) {
					q := WithinQuery{Lng: at.p[0], Lat: at.p[1], Radius: km * 1000, Limit: MaxLimit}
					spatialtest.Measure(b, func() error {
						_, err := be.Within(ctx, q)
						return err
					})
				})
			}
		}
	}
}

func BenchmarkContains(b *testing.B) {
	ctx := context.Background()
	for name, be := range backends(b) {
		for _, at := range []struct {
			name     string
			p        [2]float64
			geometry bool
		}{{"los-angeles", [2]float64{-118.25, 34.05}, false}, {"paris", dense, false}, {"ocean", [2]float64{-30, 0}, false}} {
			b.Run(name+"/"+at.name, func(b *testing.B) {
				q := ContainsQuery{Lng: at.p[0], Lat: at.p[1], Geometry: at.geometry}
				spatialtest.Measure(b, func() error {
					_, err := be.Contains(ctx, q)
					return err
				})
			})
		}
	}
}
