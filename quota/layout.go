package quota

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
)

// The layout of an identity's log in Redis, defined once here: Go reads it
// with these names (ReadLog), and both scripts get them as Lua constants
// (luaPrelude), so neither writes a position as a bare number.
//
// The log is one string: fixed-width records, one per admitted charge in
// admit order (which is time order), then a header of doubles. New records
// are written at the tail together with the header, in one SETRANGE; the
// header is read from the end with GETRANGE -size -1; records leave from
// the head as their windows slide past them, and once as many have left as
// remain, the string is rewritten without them (amortised O(1)).
//
// A record is the admit time minus the header's base, then the cost, both
// big-endian unsigned integers of as few bytes as the plan needs (see
// recordWidths): most plans take 5 or 6 bytes a record. A refunded record
// keeps its place with cost 0, so receipts can name records by index.

// The header's fields, numbered from 1 as in a Lua table unpacked from it.
const (
	hLast   = 1 + iota // the latest time seen (microseconds); time never runs back from it
	hBase              // the time record offsets count from
	hFirst             // the index, counted since the log began, of the string's first record
	hTail              // the number of records in the string
	hLive              // records before this one have left every window: they await the rewrite
	hTB                // the bytes of a record's time offset
	hCB                // the bytes of a record's cost
	hShared = hCB      // the number of fields shared by all windows
)

// Each window of the plan has hPer fields after the shared ones: window i
// (from 1) holds field f at hShared + hPer*(i-1) + f. After the windows comes
// one more double, the number of windows, so a header can be read from the
// end of the string without knowing its plan.
const (
	wWindow = 1 + iota // the window, microseconds
	wSum               // the cost of the records inside it
	wHead              // the string index of its oldest record of nonzero cost; hTail if none
	wOldest            // that record's admit time; -1 if the window is empty
	hPer    = wOldest
)

// The charge script's arguments (packed doubles), then per limit its window
// (microseconds) and max.
const (
	aRecord = 1 + iota // 1 to record an admitted cost, 0 to only look
	aCost
	aNow // microseconds; -1 to take it from Redis TIME
	aTB  // the record widths of the plan (recordWidths)
	aCB
	aShared = aCB
	aPer    = 2
)

// The charge script's reply (packed doubles), then per limit the used units,
// the admit time of its oldest record (-1 if none) and the time at which the
// cost fits (-1 if it does now).
const (
	rAllowed = 1 + iota
	rNow
	rIndex  // the admitted record's index, counted since the log began; -1 if none
	rShared = rIndex
	rPer    = 3
)

// recordPattern is the struct format of a record, given the widths of its
// time offset and its cost (string.format in Lua, fmt.Sprintf in Go).
const recordPattern = ">I%dI%d"

// compactAfter is the fewest records that must have left every window
// before the string is rewritten without them.
const compactAfter = 16

//go:embed log.lua
var logLua string

// luaPrelude starts both scripts: the layout's names as Lua constants, then
// the functions they share (log.lua).
var luaPrelude = func() string {
	var b strings.Builder
	consts := []struct {
		name  string
		value any
	}{
		{"LAST", hLast}, {"BASE", hBase}, {"FIRST", hFirst}, {"TAIL", hTail}, {"LIVE", hLive},
		{"TB", hTB}, {"CB", hCB}, {"SHARED", hShared},
		{"WINDOW", wWindow}, {"SUM", wSum}, {"HEAD", wHead}, {"OLDEST", wOldest}, {"PER", hPer},
		{"A_RECORD", aRecord}, {"A_COST", aCost}, {"A_NOW", aNow}, {"A_TB", aTB}, {"A_CB", aCB},
		{"A_SHARED", aShared}, {"A_PER", aPer},
		{"R_ALLOWED", rAllowed}, {"R_NOW", rNow}, {"R_INDEX", rIndex}, {"R_SHARED", rShared}, {"R_PER", rPer},
		{"COMPACT_AFTER", compactAfter},
	}
	b.WriteString("-- Generated from layout.go: the positions of the log's fields.\n")
	for _, c := range consts {
		fmt.Fprintf(&b, "local %s = %v\n", c.name, c.value)
	}
	fmt.Fprintf(&b, "local RECORD_PATTERN = %q\n", recordPattern)
	b.WriteString(logLua)
	return b.String()
}()

// recordWidths returns the bytes a plan's records give the time offset and
// the cost: the offset spans at least four longest windows, so the base is
// moved (the string rewritten) at most once every three; the cost holds the
// plan's MaxCost.
func recordWidths(p Plan) (tb, cb int) {
	var wmax time.Duration
	for _, l := range p.Limits {
		wmax = max(wmax, l.Window)
	}
	tb = 3
	for tb < 7 && float64(wmax.Microseconds())*4 >= math.Pow(256, float64(tb)) {
		tb++
	}
	cb = 1
	for cb < 6 && p.MaxCost() >= 1<<(8*cb) {
		cb++
	}
	return tb, cb
}

// formats caches the struct formats a decision passes, so it builds none.
type formats struct {
	args, header, reply string
}

var formatCache = func() (f [9]formats) {
	for n := range f {
		f[n] = newFormats(n)
	}
	return f
}()

var recordFormats = func() (f [8][7]string) {
	for tb := range f {
		for cb := range f[tb] {
			f[tb][cb] = fmt.Sprintf(recordPattern, tb, cb)
		}
	}
	return f
}()

func newFormats(n int) formats {
	d := func(k int) string { return ">" + strings.Repeat("d", k) }
	return formats{args: d(aShared + aPer*n), header: d(headerFields(n)), reply: d(rShared + rPer*n)}
}

func formatsFor(n int) formats {
	if n < len(formatCache) {
		return formatCache[n]
	}
	return newFormats(n)
}

// headerFields is the number of doubles in the header of n windows.
func headerFields(n int) int { return hShared + hPer*n + 1 }

// LogEntry is one admitted charge in a Redis store's log, for audits.
type LogEntry struct {
	// Index counts the identity's admitted charges since its log began.
	Index int64
	// At is the admit time, microseconds since the Unix epoch.
	At int64
	// Cost is the units it holds; 0 once refunded.
	Cost int64
}

// parseLog reads a whole log string: every record it still holds, including
// those that have left every window but await the rewrite.
func parseLog(s string) ([]LogEntry, error) {
	if len(s) < 8 {
		return nil, fmt.Errorf("quota: log of %d bytes has no header", len(s))
	}
	num := func(b string) float64 { return math.Float64frombits(binary.BigEndian.Uint64([]byte(b))) }
	n := int(num(s[len(s)-8:]))
	size := 8 * headerFields(n)
	if n < 1 || size > len(s) {
		return nil, fmt.Errorf("quota: log of %d bytes has no header of %d windows", len(s), n)
	}
	h := s[len(s)-size:]
	field := func(f int) int64 { return int64(num(h[8*(f-1) : 8*f])) }
	tb, cb, base, first := int(field(hTB)), int(field(hCB)), field(hBase), field(hFirst)
	width, tail := tb+cb, int(field(hTail))
	if tb < 1 || cb < 1 || tail*width != len(s)-size {
		return nil, fmt.Errorf("quota: log of %d bytes: %d records of %d+%d bytes do not fit", len(s), tail, tb, cb)
	}
	out := make([]LogEntry, tail)
	for i := range out {
		r := s[i*width : (i+1)*width]
		out[i] = LogEntry{Index: first + int64(i), At: base + int64(getUint(r[:tb])), Cost: int64(getUint(r[tb:]))}
	}
	return out, nil
}

func getUint(s string) uint64 {
	var v uint64
	for i := 0; i < len(s); i++ {
		v = v<<8 | uint64(s[i])
	}
	return v
}
