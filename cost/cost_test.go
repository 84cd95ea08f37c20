package cost

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

var model = Model{
	RadiusUnit: 2000,
	Tiles: map[string]TileModel{
		"places":    {RefZoom: 10, Max: 16},
		"countries": {RefZoom: 4, Max: 8},
	},
	HitDivisor: 4,
	Flat:       1,
}

func TestRadius(t *testing.T) {
	tests := []struct {
		r    float64
		want int64
	}{
		{1, 1},       // at least one unit
		{2000, 1},    // r0 costs one
		{2001, 2},    // rounded up
		{4000, 4},    // twice the radius, four times the area
		{5000, 7},    // 6.25 -> 7
		{10_000, 25}, // 25
		{100_000, 2500},
	}
	for _, tc := range tests {
		if got := model.Radius(tc.r); got != tc.want {
			t.Errorf("Radius(%v) = %d, want %d", tc.r, got, tc.want)
		}
	}
}

func TestLargestRadius(t *testing.T) {
	for _, budget := range []int64{1, 2, 7, 25, 60, 100, 600, 1000} {
		r := model.LargestRadius(budget)
		if model.Radius(r) > budget {
			t.Errorf("LargestRadius(%d) = %v costs %d", budget, r, model.Radius(r))
		}
		if model.Radius(r+1) <= budget {
			t.Errorf("LargestRadius(%d) = %v, but %v also fits", budget, r, r+1)
		}
	}
	if r := model.LargestRadius(0); r != 0 {
		t.Errorf("LargestRadius(0) = %v, want 0", r)
	}
}

func TestTile(t *testing.T) {
	tests := []struct {
		layer     string
		z         int
		miss, hit int64
	}{
		{"places", 14, 1, 1},
		{"places", 10, 1, 1},
		{"places", 9, 4, 1},
		{"places", 8, 16, 4},
		{"places", 0, 16, 4}, // capped
		{"countries", 4, 1, 1},
		{"countries", 3, 4, 1},
		{"countries", 0, 8, 2},
		{"unknown", 0, 1, 1}, // flat
	}
	for _, tc := range tests {
		if got := model.Tile(tc.layer, tc.z); got != tc.miss {
			t.Errorf("Tile(%s, %d) = %d, want %d", tc.layer, tc.z, got, tc.miss)
		}
		if got := model.CachedTile(tc.layer, tc.z); got != tc.hit {
			t.Errorf("CachedTile(%s, %d) = %d, want %d", tc.layer, tc.z, got, tc.hit)
		}
	}
	// A deep reference zoom must not overflow.
	deep := Model{RadiusUnit: 1, HitDivisor: 1, Flat: 1, Tiles: map[string]TileModel{"x": {RefZoom: 30, Max: 1 << 40}}}
	if got := deep.Tile("x", 0); got != 1<<40 {
		t.Errorf("Tile at 30 zooms below the reference = %d, want the cap", got)
	}
}

func TestLowestZoom(t *testing.T) {
	if z, ok := model.LowestZoom("places", 0, 14, 4); !ok || z != 9 {
		t.Errorf("LowestZoom(places, budget 4) = %d, %v; want 9", z, ok)
	}
	if z, ok := model.LowestZoom("places", 0, 14, 100); !ok || z != 0 {
		t.Errorf("LowestZoom(places, budget 100) = %d, %v; want 0", z, ok)
	}
	if _, ok := model.LowestZoom("places", 0, 14, 0); ok {
		t.Error("LowestZoom with no budget found a zoom")
	}
}

func TestValidate(t *testing.T) {
	if err := model.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Model{
		{RadiusUnit: 0, HitDivisor: 1, Flat: 1},
		{RadiusUnit: 1, HitDivisor: 0, Flat: 1},
		{RadiusUnit: 1, HitDivisor: 1, Flat: 0},
		{RadiusUnit: 1, HitDivisor: 1, Flat: 1, Tiles: map[string]TileModel{"x": {RefZoom: 3, Max: 0}}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func ExampleModel_Radius() {
	m := Model{RadiusUnit: 2000, HitDivisor: 4, Flat: 1}
	for _, r := range []float64{500, 2000, 5000, 20_000} {
		fmt.Printf("%6.0f m: %3d units\n", r, m.Radius(r))
	}
	fmt.Println("largest radius for 60 units:", m.LargestRadius(60), "m")
	// Output:
	//    500 m:   1 units
	//   2000 m:   1 units
	//   5000 m:   7 units
	//  20000 m: 100 units
	// largest radius for 60 units: 15491 m
}

func ExampleModel_Tile() {
	m := Model{RadiusUnit: 2000, HitDivisor: 4, Flat: 1, Tiles: map[string]TileModel{"places": {RefZoom: 10, Max: 16}}}
	for _, z := range []int{12, 10, 9, 8, 2} {
		fmt.Printf("z%-2d miss %2d hit %d empty %d\n", z, m.Tile("places", z), m.CachedTile("places", z), m.EmptyTile())
	}
	// Output:
	// z12 miss  1 hit 1 empty 1
	// z10 miss  1 hit 1 empty 1
	// z9  miss  4 hit 1 empty 1
	// z8  miss 16 hit 4 empty 1
	// z2  miss 16 hit 4 empty 1
}

func TestWork(t *testing.T) {
	m := Model{RadiusUnit: 1000, HitDivisor: 1, Flat: 1, Settle: &WorkModel{PerMS: 2, PerFeature: 0.1}}
	for _, tc := range []struct {
		charged  int64
		ms       float64
		features int
		want     int64
	}{
		{100, 0, 0, 1},       // at least one unit
		{100, 3.2, 0, 7},     // ceil(6.4)
		{100, 3, 25, 9},      // ceil(6 + 2.5)
		{5, 30, 0, 5},        // never above the price charged
		{100, 10, 1000, 100}, // 120 capped
	} {
		if got := m.Work(tc.charged, tc.ms, tc.features); got != tc.want {
			t.Errorf("Work(%d, %g ms, %d features) = %d, want %d", tc.charged, tc.ms, tc.features, got, tc.want)
		}
	}
	m.Settle = nil
	if got := m.Work(42, 1000, 1000); got != 42 {
		t.Errorf("without a model Work = %d, want the charged 42", got)
	}
	for _, bad := range []WorkModel{{PerMS: -1}, {PerFeature: math.NaN()}, {PerMS: math.Inf(1)}} {
		m.Settle = &bad
		if m.Validate() == nil {
			t.Errorf("%+v validates", bad)
		}
	}
}

func TestSellsLayer(t *testing.T) {
	named := Model{Flat: 1, Tiles: map[string]TileModel{"roads": {RefZoom: 10, Max: 16}}}
	wild := Model{Flat: 1, Tiles: map[string]TileModel{"roads": {RefZoom: 10, Max: 16}, AnyLayer: {RefZoom: 2, Max: 4}}}
	for _, tc := range []struct {
		name  string
		m     Model
		layer string
		sells bool
		z0    int64 // the price at zoom 0, where sold
	}{
		{"no tiles: every layer at flat", Model{Flat: 3}, "anything", true, 3},
		{"named", named, "roads", true, 16},
		{"not named, no *", named, "parcels", false, 0},
		{"named beside *", wild, "roads", true, 16},
		{"covered by *", wild, "parcels", true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.SellsLayer(tc.layer); got != tc.sells {
				t.Fatalf("SellsLayer(%q) = %v, want %v", tc.layer, got, tc.sells)
			}
			if tc.sells {
				if got := tc.m.Tile(tc.layer, 0); got != tc.z0 {
					t.Errorf("Tile(%q, 0) = %d, want %d", tc.layer, got, tc.z0)
				}
			}
		})
	}
}

func TestForSet(t *testing.T) {
	base := Model{RadiusUnit: 1000, Flat: 2, HitDivisor: 1}
	with := func(sets map[string]SetModel) Model { m := base; m.Sets = sets; return m }
	for _, tc := range []struct {
		name       string
		m          Model
		set        string
		sells      bool
		unit       float64
		flat       int64
		radius1000 int64 // the price of a search of 1 km
	}{
		{"no sets: every set at the plan's prices", base, "stores", true, 1000, 2, 1},
		{"named, own unit", with(map[string]SetModel{"stores": {RadiusUnit: 500}}), "stores", true, 500, 2, 4},
		{"named, own flat", with(map[string]SetModel{"stores": {Flat: 7}}), "stores", true, 1000, 7, 1},
		{"not named", with(map[string]SetModel{"stores": {}}), "zones", false, 0, 0, 0},
		{"covered by *", with(map[string]SetModel{AnyLayer: {Flat: 5}}), "zones", true, 1000, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := tc.m.ForSet(tc.set)
			if ok != tc.sells {
				t.Fatalf("ForSet(%q) sells = %v, want %v", tc.set, ok, tc.sells)
			}
			if !ok {
				return
			}
			if m.RadiusUnit != tc.unit || m.Flat != tc.flat || m.Radius(1000) != tc.radius1000 {
				t.Errorf("ForSet(%q) = unit %g flat %d radius(1km) %d, want %g %d %d", tc.set, m.RadiusUnit, m.Flat, m.Radius(1000), tc.unit, tc.flat, tc.radius1000)
			}
		})
	}
	if err := with(map[string]SetModel{"x": {RadiusUnit: math.NaN()}}).Validate(); err == nil || !strings.Contains(err.Error(), `sets "x"`) {
		t.Errorf("a NaN radius unit: %v", err)
	}
}
