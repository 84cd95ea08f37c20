package quota

import (
	_ "embed"

	"github.com/tileapi/tileapi/quota/internal/redislayout"
)

//go:generate go test -run TestLayoutLua -update

// The scripts and this package share the constants of this file and of
// internal/redislayout (the log's layout): layout.lua declares each as a Lua
// local of its Go name, generated from the Go source (TestLayoutLua, run
// with -update to rewrite it), and every script that reads a log runs it
// first (library.go). So a name is spelled the same in Go and in Lua (the
// Go name without its package: redislayout.Sum is Sum, aCost is aCost),
// and its value is written once. Every constant declared in this file
// reaches the scripts; one they do not need belongs in another file.

// A part of the charge (an identity's log) is given its plan as packed
// doubles in the shape of a header, so that one struct format reads both:
// numbered from 1 as in the Lua table unpacked from them, these first,
// then each limit's where the header holds its window's fields. Nothing
// in them changes from call to call, so the script decodes a plan once
// and keeps it (log.lua's planOf); what does change (the cost, the time,
// the deadline, the slot) comes in the call's own argument (charge.lua).
const (
	aTB = 1 + iota // the record widths of the part's plan (recordWidths)
	aCB
	aN       // the number of the log's windows
	aPeriods // the number of the part's calendar periods: their keys and arguments follow the part's
	aTTL     // the log's TTL in milliseconds (logTTL)
)

// Limit i (from 1) has argument f at redislayout.WindowField(i-1, f),
// where the header holds field f of window i.
const (
	aWindow = 1 // the window, microseconds
	aMax    = 2 // the most units it holds
)

// lateReply is the charge script's reply when it ran after the caller's
// deadline, and made no charge.
const lateReply = "late"

// restoreReply starts the charge script's reply when counters of calendar
// periods are missing and must be looked up (PeriodSource).
const restoreReply = "restore"

// slotReply starts the charge script's reply when the charge was to take
// an in-flight slot (Slot) and every one is held: nothing is charged or
// taken. A packed double follows: how long until the first held slot's
// lease ends, in milliseconds.
const slotReply = "slot"

// duplicateReply is the overdraft script's reply when its id was charged
// already.
const duplicateReply = "duplicate"

// What the charge script does with a missing counter of a period whose
// units it was not given: ask the caller for them, or count from zero.
const (
	restoreAsk  = -1
	restoreNone = -2
)

// expiresField is the field of an identity's counters that holds when
// their TTL, as last set, ends (a packed double, microseconds): the charge
// script sets it again (PEXPIREAT) only when a period ends later, not at
// every charge. No limit can be named so: a limit's name is a token.
//
//lint:ignore U1000 read by the scripts: layout.lua is generated from it (TestLayoutLua)
const expiresField = "~expires"

// recordPattern is the struct format of a record, given the widths of its
// time offset and its cost (string.format in Lua).
//
//lint:ignore U1000 read by the scripts: layout.lua is generated from it (TestLayoutLua)
const recordPattern = ">I%dI%d"

// compactAfter is the fewest records that must have left every window
// before the log is rewritten without them, when its room is not full.
//
//lint:ignore U1000 read by the scripts: layout.lua is generated from it (TestLayoutLua)
const compactAfter = 16

// minRoom is the fewest records a rewritten log has room for beyond its
// live ones (it is given half as many again as it keeps, at least this).
//
//lint:ignore U1000 read by the scripts: layout.lua is generated from it (TestLayoutLua)
const minRoom = 8

// oneWrite is the most bytes of room between a new record and the header
// that are written over with zeros made anew (string.rep), so that the
// record and the header go in one SETRANGE: cheaper for Redis than a
// second command. Room that the chunk read holds is copied from it and
// written over whatever its size.
//
//lint:ignore U1000 read by the scripts: layout.lua is generated from it (TestLayoutLua)
const oneWrite = 256

// chunkStart is where a script's first read of a log starts, counted from
// its end: the last 4096 bytes, which hold the header and the newest
// records, and the whole of a small log. It is text, as Redis would format
// a number argument at a cost.
//
//lint:ignore U1000 read by the scripts: layout.lua is generated from it (TestLayoutLua)
const chunkStart = "-4096"

var (
	//go:embed layout.lua
	layoutLua string
	//go:embed log.lua
	logLua string
)

// recordWidths returns the bytes a plan's records give the time offset and
// the cost: the offset spans at least four longest windows, so the base is
// moved (the string rewritten) at most once every three; the cost holds the
// plan's MaxCost.
func recordWidths(p Plan) (tb, cb int) {
	wmax := p.keep()
	tb = 3
	for tb < 7 && wmax.Microseconds()*4 >= 1<<(8*tb) {
		tb++
	}
	cb = 1
	for cb < 6 && p.MaxCost() >= 1<<(8*cb) {
		cb++
	}
	return tb, cb
}

// headerFields is the number of doubles in the header of n windows.
func headerFields(n int) int { return redislayout.HeaderFields(n) }

// header is a log header as the scripts write it (redislayout.Header), or
// other packed doubles of a script's reply.
type header string

// field returns field f, from 1 (redislayout.Last, ...).
func (h header) field(f int) int64 { return redislayout.Header(h).Field(f) }

// window returns field f (redislayout.Sum, ...) of window i, from 0.
func (h header) window(i, f int) int64 { return redislayout.Header(h).Window(i, f) }
