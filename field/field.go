// Package field holds the error type that names the request field a value
// was rejected for, shared by the geofence and tiles validators so the HTTP
// layer maps one type to a 400 response.
package field

import "fmt"

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
