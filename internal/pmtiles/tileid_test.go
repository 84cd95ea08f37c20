package pmtiles

import "testing"

// TestZXYToID checks the IDs the specification's table gives (section 4.1)
// and the ends of each zoom's range.
func TestZXYToID(t *testing.T) {
	for _, tc := range []struct {
		z    uint8
		x, y uint32
		id   uint64
	}{
		{0, 0, 0, 0},
		{1, 0, 0, 1},
		{1, 0, 1, 2},
		{1, 1, 1, 3},
		{1, 1, 0, 4},
		{2, 0, 0, 5},
		{12, 3423, 1763, 19078479},
		{MaxZoom, 0, 0, (1<<62 - 1) / 3},
		// The curve of each zoom ends at its lower right corner.
		{3, 7, 0, 5 + 16 + 63},
		{MaxZoom, 1<<31 - 1, 0, (1<<62-1)/3 + 1<<62 - 1},
	} {
		if got := ZXYToID(tc.z, tc.x, tc.y); got != tc.id {
			t.Errorf("ZXYToID(%d, %d, %d) = %d, want %d", tc.z, tc.x, tc.y, got, tc.id)
		}
		if z, x, y := IDToZXY(tc.id); z != tc.z || x != tc.x || y != tc.y {
			t.Errorf("IDToZXY(%d) = %d/%d/%d, want %d/%d/%d", tc.id, z, x, y, tc.z, tc.x, tc.y)
		}
	}
}

// TestIDRoundTrip checks that every tile of zooms 0 to 9 has its own ID,
// the next after the one before along the curve, which IDToZXY inverts.
func TestIDRoundTrip(t *testing.T) {
	seen := make([]bool, ZXYToID(10, 0, 0))
	for z := uint8(0); z < 10; z++ {
		for x := uint32(0); x < 1<<z; x++ {
			for y := uint32(0); y < 1<<z; y++ {
				id := ZXYToID(z, x, y)
				if id >= uint64(len(seen)) || seen[id] {
					t.Fatalf("ZXYToID(%d, %d, %d) = %d: repeated or past zoom 9", z, x, y, id)
				}
				seen[id] = true
				if rz, rx, ry := IDToZXY(id); rz != z || rx != x || ry != y {
					t.Fatalf("IDToZXY(ZXYToID(%d, %d, %d)) = %d/%d/%d", z, x, y, rz, rx, ry)
				}
			}
		}
	}
	// Consecutive IDs of a zoom are neighbouring tiles: the curve is
	// continuous.
	for id := uint64(1); id < uint64(len(seen)); id++ {
		z0, x0, y0 := IDToZXY(id - 1)
		z1, x1, y1 := IDToZXY(id)
		if z0 == z1 && absDiff(x0, x1)+absDiff(y0, y1) != 1 {
			t.Fatalf("IDs %d and %d: tiles %d/%d/%d and %d/%d/%d are not neighbours", id-1, id, z0, x0, y0, z1, x1, y1)
		}
	}
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestIDExtremes checks the corners of every zoom up to MaxZoom.
func TestIDExtremes(t *testing.T) {
	for z := uint8(0); z <= MaxZoom; z++ {
		last := uint32(1)<<z - 1
		for _, c := range [][2]uint32{{0, 0}, {last, 0}, {0, last}, {last, last}} {
			if rz, rx, ry := IDToZXY(ZXYToID(z, c[0], c[1])); rz != z || rx != c[0] || ry != c[1] {
				t.Errorf("IDToZXY(ZXYToID(%d, %d, %d)) = %d/%d/%d", z, c[0], c[1], rz, rx, ry)
			}
		}
	}
}

func TestValidZXY(t *testing.T) {
	for _, tc := range []struct {
		z    uint8
		x, y uint32
		want bool
	}{
		{0, 0, 0, true},
		{0, 1, 0, false},
		{3, 7, 7, true},
		{3, 8, 0, false},
		{3, 0, 8, false},
		{MaxZoom, 1<<31 - 1, 1<<31 - 1, true},
		{MaxZoom + 1, 0, 0, false},
		{255, 0, 0, false},
	} {
		if got := ValidZXY(tc.z, tc.x, tc.y); got != tc.want {
			t.Errorf("ValidZXY(%d, %d, %d) = %v, want %v", tc.z, tc.x, tc.y, got, tc.want)
		}
	}
}
