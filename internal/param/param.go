// Package param holds the error type that names the request field a value
// was rejected for, shared by the geofence and tiles validators so the HTTP
// layer maps one type to a 400 response, and the one strict syntax every
// number in a request is read with.
package param

import (
	"fmt"
	"strconv"
	"strings"
)

// Error reports that the value of one input field is invalid.
// Match it with errors.As.
type Error struct {
	Field  string // the field's name as the API spells it: "lng", "radius", "z"
	Reason string // what a valid value looks like, e.g. "must be in [-180, 180]"
}

// Error returns "invalid <field>: <reason>".
func (e *Error) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

// Invalid returns an *Error for the field with a formatted reason.
func Invalid(name, format string, args ...any) *Error {
	return &Error{Field: name, Reason: fmt.Sprintf(format, args...)}
}

// What Float and Int accept, as their errors say it.
const (
	decimalForm = "a number as JSON writes one, such as -73.98 or 1e-7"
	wholeForm   = "a plain whole number such as 12"
)

// Float reads s, the value of the named field, as a number in JSON's
// grammar (RFC 8259 section 6), which is also how JavaScript's String
// writes one: an optional '-', digits with no superfluous leading zero, an
// optional '.' followed by digits, and an optional exponent ('e' or 'E', a
// sign, digits), so "-73.98", "1e-7" and "1E1" are numbers. What
// strconv.ParseFloat takes beyond it ("+1", "1_0", "0x1p1", ".5", "5.",
// "01", "inf", "NaN") is refused, so what a client sent is what it meant,
// and a typo is an error rather than another number. A number below the
// smallest float64 reads as zero; one beyond the largest is refused. The
// error is an *Error naming the field.
func Float(name, s string) (float64, error) {
	if !isJSONNumber(s) {
		return 0, syntaxError(name, s, decimalForm)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil { // the syntax is checked: only a value beyond float64 is left
		return 0, Invalid(name, "is too large")
	}
	return v, nil
}

// Int reads s, the value of the named field, as a plain whole number: digits
// with no sign and no superfluous leading zero ("0" itself is fine). The
// error is an *Error naming the field.
func Int(name, s string) (int64, error) {
	if !isNatural(s) {
		return 0, syntaxError(name, s, wholeForm)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // the syntax is checked: only a value beyond int64 is left
		return 0, Invalid(name, "is too large")
	}
	return v, nil
}

func syntaxError(name, s, form string) *Error {
	if s == "" {
		return Invalid(name, "is required: %s", form)
	}
	return Invalid(name, "must be %s", form)
}

// isJSONNumber reports whether s is -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func isJSONNumber(s string) bool {
	mantissa, exp, hasExp := cutAny(strings.TrimPrefix(s, "-"), "eE")
	whole, frac, dot := strings.Cut(mantissa, ".")
	if !isNatural(whole) || dot && (frac == "" || !isDigits(frac)) {
		return false
	}
	if !hasExp {
		return true
	}
	exp = strings.TrimLeft(exp[:min(len(exp), 1)], "+-") + exp[min(len(exp), 1):]
	return exp != "" && isDigits(exp)
}

// cutAny slices s around the first byte of any of chars, as strings.Cut.
func cutAny(s, chars string) (before, after string, found bool) {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// isNatural reports whether s is 0|[1-9][0-9]*.
func isNatural(s string) bool {
	return s == "0" || s != "" && s[0] != '0' && isDigits(s)
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
