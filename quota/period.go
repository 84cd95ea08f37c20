package quota

import (
	"fmt"
	"time"
)

// Period is a calendar period a limit counts in, instead of a sliding
// window: a day or a month, from midnight (or the first of the month) in
// the plan's time zone. A period limit is an exact counter that starts
// again at zero at each boundary: what a customer buys by the month.
type Period string

// The periods.
const (
	Sliding Period = ""      // a sliding window (Limit.Window)
	Day     Period = "day"   // from midnight to midnight
	Month   Period = "month" // from the first of the month to the first of the next
)

// PerDay returns a limit named "day" of max units per calendar day.
func PerDay(max int64) Limit { return Limit{Name: "day", Max: max, Period: Day} }

// PerMonth returns a limit named "month" of max units per calendar month.
func PerMonth(max int64) Limit { return Limit{Name: "month", Max: max, Period: Month} }

// Bounds returns the start and the end of the period of p that holds t,
// in loc (UTC if nil), as a store counts it: from midnight, or the first
// of the month, to the next one (a day is 23 or 25 hours long where the
// clocks change). It is for a Period limit.
func (p Period) Bounds(t time.Time, loc *time.Location) (start, end time.Time) {
	if loc == nil {
		loc = time.UTC
	}
	s := p.start(t, loc)
	return s, p.next(s)
}

// start returns the start of the period that holds t, in loc.
func (p Period) start(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	if p == Month {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
}

// next returns the start of the period after the one that starts at s
// (a day may be 23 or 25 hours long where the clocks change).
func (p Period) next(s time.Time) time.Time {
	if p == Month {
		return time.Date(s.Year(), s.Month()+1, 1, 0, 0, 0, 0, s.Location())
	}
	return time.Date(s.Year(), s.Month(), s.Day()+1, 0, 0, 0, 0, s.Location())
}

// span is a period as a store counts it, in microseconds since the Unix
// epoch: the period that holds now runs from start to end, the one after
// it to next. A store whose clock has passed end counts in the one after.
type span struct{ start, end, next int64 }

// spanAt returns the span of the period of p that holds t, in loc.
func (p Period) spanAt(t time.Time, loc *time.Location) span {
	s := p.start(t, loc)
	e := p.next(s)
	return span{start: s.UnixMicro(), end: e.UnixMicro(), next: p.next(e).UnixMicro()}
}

// pick returns the start and end of the period that holds now: the one of
// the span, or the one after it once now has passed its end (the store's
// clock ahead of the caller's across a boundary).
func (s span) pick(now int64) (start, end int64) {
	if now >= s.end {
		return s.end, s.next
	}
	return s.start, s.end
}

func (p Period) valid() error {
	switch p {
	case Sliding, Day, Month:
		return nil
	}
	return fmt.Errorf("period %q is not day or month", string(p))
}

// location is the plan's time zone, UTC where none is set.
func (p Plan) location() *time.Location {
	if p.Location == nil {
		return time.UTC
	}
	return p.Location
}
