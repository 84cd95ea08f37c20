package cost

import (
	"fmt"
	"testing"
)

// sized is model with the compiled-in plans' geometry prices: a unit per
// 4 KiB, at most 16.
var sized = func() Model {
	m := model
	m.Geometry = &GeometryModel{UnitBytes: 4096, Max: 16}
	return m
}()

func TestGeometryBytes(t *testing.T) {
	tests := []struct {
		name  string
		m     Model
		bytes int
		want  int64
	}{
		{"nothing", sized, 0, 1},
		{"one byte", sized, 1, 1},
		{"a tile's worth, 2.6 KiB", sized, 2662, 1},
		{"4 KiB", sized, 4096, 1},
		{"a byte more", sized, 4097, 2},
		{"64 KiB", sized, 65536, 16},
		{"Canada, 443 KiB: the most", sized, 453740, 16},
		{"a size that cannot be", sized, -1, 16},
		{"no model: flat", model, 453740, 1},
		{"flat above the model's max", Model{Flat: 3, Geometry: &GeometryModel{UnitBytes: 10, Max: 2}}, 15, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, bound := tc.m.GeometryBytes(tc.bytes), tc.m.GeometryBound()
			if got != tc.want || got > bound || got < tc.m.Flat {
				t.Errorf("GeometryBytes(%d) = %d (bound %d), want %d, within [flat, bound]", tc.bytes, got, bound, tc.want)
			}
		})
	}
	if b := model.GeometryBound(); b != model.Flat {
		t.Errorf("GeometryBound without a model = %d, want flat %d", b, model.Flat)
	}
}

func TestGeometryValidate(t *testing.T) {
	for _, g := range []GeometryModel{{UnitBytes: 0, Max: 16}, {UnitBytes: 4096, Max: 0}, {UnitBytes: -1, Max: 1}} {
		m := sized
		m.Geometry = &g
		if m.Validate() == nil {
			t.Errorf("geometry %+v: valid", g)
		}
	}
	if err := sized.Validate(); err != nil {
		t.Error(err)
	}
}

func ExampleModel_GeometryBytes() {
	m := Model{Flat: 1, Geometry: &GeometryModel{UnitBytes: 4096, Max: 16}}
	fmt.Println("charged up front:", m.GeometryBound())
	for _, n := range []int{900, 10_000, 453_740} {
		fmt.Printf("%d bytes: %d\n", n, m.GeometryBytes(n))
	}
	// Output:
	// charged up front: 16
	// 900 bytes: 1
	// 10000 bytes: 3
	// 453740 bytes: 16
}
