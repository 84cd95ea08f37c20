package loadtest

import (
	"slices"
	"testing"
	"time"
)

func TestCheckWindows(t *testing.T) {
	l := Limit{Name: "burst", Window: time.Second, Max: 10}
	const s = int64(time.Second / time.Microsecond)
	for _, tc := range []struct {
		name       string
		adm        []Admission
		peak       int64
		violations int
		first      int64
	}{
		{"empty", nil, 0, 0, 0},
		{"exactly the max", []Admission{{0, 4}, {s / 2, 6}}, 10, 0, 0},
		// The window is (t-1s, t]: a charge exactly one window older has left.
		{"boundary: the old charge has left", []Admission{{1, 10}, {1 + s, 10}}, 10, 0, 0},
		{"one microsecond inside", []Admission{{1, 10}, {s, 1}}, 11, 1, s},
		// Unsorted input, and two charges at the same instant: the window
		// ending then holds both.
		{"same instant", []Admission{{5 * s, 6}, {2 * s, 3}, {5 * s, 5}}, 11, 1, 5 * s},
		{"a slid window over the max", []Admission{{0, 3}, {s / 4, 3}, {s / 2, 3}, {3 * s / 4, 3}, {s + s/10, 3}, {s + s/2, 3}}, 12, 2, 3 * s / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := CheckWindows(slices.Clone(tc.adm), l)
			if c.Peak != tc.peak || c.Violations != tc.violations || c.FirstViolation != tc.first {
				t.Errorf("peak %d, %d violations, first at %d; want %d, %d, %d", c.Peak, c.Violations, c.FirstViolation, tc.peak, tc.violations, tc.first)
			}
		})
	}
}

func TestTrailingSums(t *testing.T) {
	ev := []Admission{{10, 1}, {20, 2}, {35, 4}}
	got := TrailingSums(ev, 20*time.Microsecond, 0, 60, 10)
	want := []int64{0, 1, 3, 2, 4, 4, 0} // t = 0, 10, ..., 60; window (t-20, t]
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestCheckLoopback(t *testing.T) {
	for u, ok := range map[string]bool{
		"http://127.0.0.1:8080":    true,
		"http://localhost:8080":    true,
		"http://[::1]:8080":        true,
		"redis://127.0.0.2:6379/0": true,
		"http://10.0.0.1:8080":     false,
		"http://example.com":       false,
		"http://0.0.0.0:8080":      false,
	} {
		if err := CheckLoopback(u); (err == nil) != ok {
			t.Errorf("CheckLoopback(%q) = %v, want ok=%v", u, err, ok)
		}
	}
}
