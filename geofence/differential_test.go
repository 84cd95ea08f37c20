package geofence

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/paulmach/orb"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// randomPoint returns a point of one of several kinds, so that queries hit
// both empty and dense areas, the antimeridian and the poles.
func randomPoint(rng *rand.Rand, places []dataset.Place) (string, orb.Point) {
	switch rng.IntN(6) {
	case 0: // uniform on the sphere
		return "anywhere", orb.Point{rng.Float64()*360 - 180, math.Asin(rng.Float64()*2-1) * 180 / math.Pi}
	case 1: // near the antimeridian, on either side
		return "antimeridian", orb.Point{math.Copysign(179+rng.Float64(), rng.Float64()-0.5), rng.Float64()*150 - 75}
	case 2: // polar
		return "polar", orb.Point{rng.Float64()*360 - 180, math.Copysign(75+rng.Float64()*15, rng.Float64()-0.5)}
	case 3: // at a place
		return "at a place", places[rng.IntN(len(places))].Point
	default: // near a place
		p := places[rng.IntN(len(places))].Point
		return "near a place", orb.Point{
			min(max(p[0]+rng.NormFloat64()*0.02, -180), 180),
			min(max(p[1]+rng.NormFloat64()*0.02, -90), 90),
		}
	}
}

// TestDifferentialWithin runs random radius queries against both backends
// and requires each answer nearest first by its own distances, and the same
// places, except those within 0.5% of the radius
// from the boundary, where sphere and spheroid distances may disagree, and
// beyond the last place of a list cut by its limit.
func TestDifferentialWithin(t *testing.T) {
	ctx := context.Background()
	b := backends(t)
	pg, mem := b["postgis"], b["memory"]
	_, d := spatialtest.Loaded(t)
	seed := uint64(20261130)
	rng := rand.New(rand.NewPCG(seed, 1))
	const n = 600
	kinds := map[string]int{}
	nonEmpty, boundary := 0, 0
	for i := range n {
		kind, c := randomPoint(rng, d.Places)
		kinds[kind]++
		q := WithinQuery{
			Lng: c[0], Lat: c[1],
			Radius: math.Exp(rng.Float64()*math.Log(MaxRadius/10)) * 10, // log-uniform in [10 m, MaxRadius]
			Limit:  MaxLimit,
		}
		if rng.IntN(4) == 0 {
			q.Limit = 1 + rng.IntN(20)
		}
		name := fmt.Sprintf("query %d (%s, seed %d): %+v", i, kind, seed, q)
		want, err := pg.Within(ctx, q)
		if err != nil {
			t.Fatalf("%s: postgis: %v", name, err)
		}
		got, err := mem.Within(ctx, q)
		if err != nil {
			t.Fatalf("%s: memory: %v", name, err)
		}
		if len(want) > 0 {
			nonEmpty++
		}
		checkNearestFirst(t, name+": postgis", want)
		checkNearestFirst(t, name+": memory", got)
		boundary += compareWithin(t, name, q, want, got)
	}
	t.Logf("%d queries (%v), %d with places, %d places within 0.5%% of the boundary found by one backend only",
		n, kinds, nonEmpty, boundary)
	if nonEmpty < n/4 {
		t.Errorf("only %d of %d queries found places", nonEmpty, n)
	}
}

// checkNearestFirst reports the places of ns that come before a nearer one,
// by the distances ns gives, or an equally near one of a lower id.
func checkNearestFirst(t *testing.T, name string, ns []Near) {
	t.Helper()
	for i := 1; i < len(ns); i++ {
		a, b := ns[i-1], ns[i]
		if a.Distance > b.Distance || a.Distance == b.Distance && a.ID > b.ID {
			t.Errorf("%s: %d at %.3f m before %d at %.3f m", name, a.ID, a.Distance, b.ID, b.Distance)
		}
	}
}

// compareWithin reports the differences between the two lists beyond the
// tolerance, and returns how many it tolerated.
func compareWithin(t *testing.T, name string, q WithinQuery, want, got []Near) int {
	t.Helper()
	// Where a list is cut by the limit, only places nearer than the last
	// place of both lists must agree, by more than the backends' distances
	// may differ.
	cut := math.Inf(1)
	for _, ns := range [][]Near{want, got} {
		if len(ns) == q.Limit {
			last := ns[len(ns)-1].Distance
			cut = min(cut, last-2*(1e-4*last+0.01))
		}
	}
	index := func(ns []Near) map[int64]Near {
		m := map[int64]Near{}
		for _, n := range ns {
			if n.Distance < cut {
				m[n.ID] = n
			}
		}
		return m
	}
	w, g := index(want), index(got)
	tolerated := 0
	for id, n := range w {
		m, ok := g[id]
		switch {
		case !ok && math.Abs(n.Distance-q.Radius) > 0.005*q.Radius:
			t.Errorf("%s: postgis has %d %s at %.2f m, memory does not", name, id, n.Name, n.Distance)
		case !ok:
			tolerated++
		case math.Abs(m.Distance-n.Distance) > 1e-4*n.Distance+0.01:
			t.Errorf("%s: %d %s at %.3f m on postgis, %.3f m in memory", name, id, n.Name, n.Distance, m.Distance)
		}
	}
	for id, m := range g {
		if _, ok := w[id]; ok {
			continue
		}
		if math.Abs(m.Distance-q.Radius) > 0.005*q.Radius {
			t.Errorf("%s: memory has %d %s at %.2f m, postgis does not", name, id, m.Name, m.Distance)
		} else {
			tolerated++
		}
	}
	return tolerated
}

// TestDifferentialContains runs random containment queries against both
// backends and requires the same fences.
func TestDifferentialContains(t *testing.T) {
	ctx := context.Background()
	b := backends(t)
	pg, mem := b["postgis"], b["memory"]
	_, d := spatialtest.Loaded(t)
	seed := uint64(20261130)
	rng := rand.New(rand.NewPCG(seed, 2))
	const n = 600
	found := 0
	for i := range n {
		kind, c := randomPoint(rng, d.Places)
		q := ContainsQuery{Lng: c[0], Lat: c[1]}
		want, err := pg.Contains(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mem.Contains(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) > 0 {
			found++
		}
		key := func(fs []dataset.Fence) []string {
			var ks []string
			for _, f := range fs {
				ks = append(ks, fmt.Sprintf("%s %d %s", f.Kind, f.ID, f.Name))
			}
			return ks
		}
		if !slices.Equal(key(want), key(got)) {
			t.Errorf("query %d (%s, seed %d) at %v: postgis %v, memory %v", i, kind, seed, c, key(want), key(got))
		}
	}
	t.Logf("%d queries, %d inside a fence", n, found)
}
