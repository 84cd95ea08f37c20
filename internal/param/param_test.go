package param

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestFloat(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want float64
	}{
		{"0", 0},
		{"-0", 0},
		{"0.5", 0.5},
		{"-73.98", -73.98},
		{"180", 180},
		{"100000", 100000},
		{"2.350", 2.35},
		{"0.000", 0},
		{"12345678901234567890", 12345678901234567890},
		{"0." + strings.Repeat("0", 400) + "1", 0}, // below the smallest float64: rounds to zero
		// JSON's exponents, as JavaScript's String writes small and large numbers.
		{"1e-7", 1e-7},
		{"1E1", 10},
		{"-1.5e+3", -1500},
		{"2.5E-2", 0.025},
		{"0e0", 0},
		{"1e-400", 0},
		{"1e007", 1e7}, // leading zeros in an exponent are JSON's
	} {
		got, err := Float("lng", tc.s)
		if err != nil || got != tc.want {
			t.Errorf("Float(%q) = %v, %v; want %v", tc.s, got, err, tc.want)
		}
	}
}

func TestFloatRejects(t *testing.T) {
	for _, s := range []string{
		"", "-", ".", "+1", "1_0", "0x1p1", "0x10", ".5", "-.5", "5.", "-5.",
		"01", "-01", "00", "00.5", "inf", "-inf", "Inf", "+Inf", "infinity", "NaN", "nan",
		" 1", "1 ", "1\n", "1.2.3", "--1", "1-", "١", "1,5", "0b1", "0o7", "½",
		"1e", "1e+", "1e-", "e5", "-e5", "1.e5", ".1e5", "1e5.5", "1ee5", "1e+-5", "1e 5", "01e5", "1_0e1", "0x1e1",
		"1" + strings.Repeat("0", 400), "1e400", "-1e309", // beyond float64
	} {
		v, err := Float("lng", s)
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "lng" {
			t.Errorf("Float(%q) = %v, %v; want an *Error for lng", s, v, err)
			continue
		}
		beyond := s == "1"+strings.Repeat("0", 400) || s == "1e400" || s == "-1e309"
		if beyond && fe.Reason != "is too large" || !beyond && !strings.Contains(fe.Reason, "as JSON writes one, such as -73.98 or 1e-7") {
			t.Errorf("Float(%q): reason %q does not say what a valid value looks like", s, fe.Reason)
		}
	}
	if _, err := Float("radius", ""); err == nil || err.Error() != "invalid radius: is required: a number as JSON writes one, such as -73.98 or 1e-7" {
		t.Errorf("Float of nothing: %v", err)
	}
}

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int64
	}{{"0", 0}, {"1", 1}, {"10", 10}, {"1000", 1000}, {"9223372036854775807", math.MaxInt64}} {
		got, err := Int("z", tc.s)
		if err != nil || got != tc.want {
			t.Errorf("Int(%q) = %v, %v; want %v", tc.s, got, err, tc.want)
		}
	}
	for _, s := range []string{
		"", "-1", "-0", "+1", "01", "00", "1_0", "0x10", "1e3", "1.0", "1.", " 1", "1 ", "one", "٣",
		"9223372036854775808", "99999999999999999999999",
	} {
		v, err := Int("z", s)
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "z" {
			t.Errorf("Int(%q) = %v, %v; want an *Error for z", s, v, err)
		}
	}
	if _, err := Int("x", "007"); err == nil || err.Error() != "invalid x: must be a plain whole number such as 12" {
		t.Errorf("Int(007): %v", err)
	}
}

// The grammars, written independently of the code under test.
var (
	decimalRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	wholeRE   = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
)

// FuzzFloat checks Float against JSON's grammar: it accepts exactly its
// numbers (that fit a float64), reads them as strconv.ParseFloat does, and
// rejects everything else with an *Error naming the field.
func FuzzFloat(f *testing.F) {
	for _, s := range []string{"0", "-73.98", "1_0", "0x1p1", "01", "1e3", "1E-7", "1e+400", "1e", "+1", "inf", "NaN", ".5", "5.", "-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Float("lat", s)
		want, perr := strconv.ParseFloat(s, 64)
		if decimalRE.MatchString(s) && perr == nil {
			if err != nil || v != want {
				t.Fatalf("Float(%q) = %v, %v; want %v", s, v, err, want)
			}
			return
		}
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "lat" {
			t.Fatalf("Float(%q) = %v, %v; want an *Error for lat", s, v, err)
		}
	})
}

// FuzzInt checks Int against the grammar likewise.
func FuzzInt(f *testing.F) {
	for _, s := range []string{"0", "12", "01", "-1", "+1", "1_0", "0x10", "9223372036854775808", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Int("limit", s)
		want, perr := strconv.ParseInt(s, 10, 64)
		if wholeRE.MatchString(s) && perr == nil {
			if err != nil || v != want {
				t.Fatalf("Int(%q) = %v, %v; want %v", s, v, err, want)
			}
			return
		}
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "limit" {
			t.Fatalf("Int(%q) = %v, %v; want an *Error for limit", s, v, err)
		}
	})
}
