package quota

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tileapi/tileapi/quota/internal/redislayout"
)

// The layout of an identity's log in Redis is defined once, in
// internal/redislayout, which Records also reads it with; the scripts are
// written with its names (luaScript), so neither writes a position as a
// bare number. These are its names as this package spells them.
const (
	hLast, hBase, hFirst, hTail, hLive = redislayout.Last, redislayout.Base, redislayout.First, redislayout.Tail, redislayout.Live
	hTB, hCB, hCap, hShared, hPer      = redislayout.TB, redislayout.CB, redislayout.Cap, redislayout.Shared, redislayout.Per

	wWindow, wSum, wHead, wOldest, wOldestCost = redislayout.Window, redislayout.Sum, redislayout.Head, redislayout.Oldest, redislayout.OldestCost
)

// The charge script's arguments (packed doubles), then per limit its window
// (microseconds) and max, padded to the size of a header so that one struct
// format reads both.
const (
	aRecord = 1 + iota // 1 to record an admitted cost, 0 to only look
	aCost
	aNow // microseconds; -1 to take it from Redis TIME
	aTB  // the record widths of the plan (recordWidths)
	aCB
	aN        // the number of limits
	aDeadline // the caller's deadline, microseconds of Redis time; 0 for none
	aShared   = aDeadline
	aPer      = 2
)

// lateReply is the charge script's reply when it ran after the caller's
// deadline, and made no charge.
const lateReply = "late"

// restoreReply starts the charge script's reply when counters of calendar
// periods are missing and must be looked up (PeriodSource).
const restoreReply = "restore"

// What the charge script does with a missing counter of a period whose
// units it was not given: ask the caller for them, or count from zero.
const (
	restoreAsk  = -1
	restoreNone = -2
)

// recordPattern is the struct format of a record, given the widths of its
// time offset and its cost (string.format in Lua, fmt.Sprintf in Go).
const recordPattern = ">I%dI%d"

// compactAfter is the fewest records that must have left every window
// before the log is rewritten without them, when its room is not full.
const compactAfter = 16

// minRoom is the fewest records a rewritten log has room for beyond its
// live ones (it is given half as many again as it keeps, at least this).
const minRoom = 8

// oneWrite is the most bytes of room between a new record and the header
// that are written over (with zeros) so that the record and the header go
// in one SETRANGE: cheaper for Redis than a second command.
const oneWrite = 256

// chunk is the bytes a script reads from the end of a log at once: the
// header and the newest records, and the whole of a small log.
const chunk = 4096

//go:embed log.lua
var logLua string

// luaConstants are the layout's names as the scripts spell them.
var luaConstants = map[string]string{
	"LAST": strconv.Itoa(hLast), "BASE": strconv.Itoa(hBase), "FIRST": strconv.Itoa(hFirst),
	"TAIL": strconv.Itoa(hTail), "LIVE": strconv.Itoa(hLive), "TB": strconv.Itoa(hTB), "CB": strconv.Itoa(hCB), "CAP": strconv.Itoa(hCap),
	"SHARED": strconv.Itoa(hShared), "PER": strconv.Itoa(hPer),
	"WINDOW": strconv.Itoa(wWindow), "SUM": strconv.Itoa(wSum), "HEAD": strconv.Itoa(wHead), "OLDEST": strconv.Itoa(wOldest),
	"OLDEST_COST": strconv.Itoa(wOldestCost),
	"A_RECORD":    strconv.Itoa(aRecord), "A_COST": strconv.Itoa(aCost), "A_NOW": strconv.Itoa(aNow),
	"A_TB": strconv.Itoa(aTB), "A_CB": strconv.Itoa(aCB), "A_N": strconv.Itoa(aN), "A_DEADLINE": strconv.Itoa(aDeadline),
	"A_SHARED": strconv.Itoa(aShared), "A_PER": strconv.Itoa(aPer),
	"COMPACT_AFTER":  strconv.Itoa(compactAfter),
	"MIN_ROOM":       strconv.Itoa(minRoom),
	"ONE_WRITE":      strconv.Itoa(oneWrite),
	"CHUNK_START":    strconv.Quote(strconv.Itoa(-chunk)),
	"RECORD_PATTERN": strconv.Quote(recordPattern),
	"LATE":           strconv.Quote(lateReply),
	"RESTORE":        strconv.Quote(restoreReply),
	"RESTORE_ASK":    strconv.Itoa(restoreAsk),
	"RESTORE_NONE":   strconv.Itoa(restoreNone),
}

var luaConstant = regexp.MustCompile(`\b[A-Z][A-Z_]*\b`)

// luaScript renders a script: log.lua, the functions both scripts share,
// then body, with the layout's names replaced by their values. The source
// reads by name; Redis runs literals, as a Lua local would cost a load on
// every call and an upvalue in every function that uses it.
func luaScript(body string) string {
	return luaConstant.ReplaceAllStringFunc(logLua+body, func(name string) string {
		if v, ok := luaConstants[name]; ok {
			return v
		}
		return name
	})
}

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

// headerFormats caches the struct formats of headers (and arguments) of up
// to 8 windows, and recordFormats those of records, so a decision builds
// none.
var headerFormats = func() (f [9]string) {
	for n := range f {
		f[n] = newHeaderFormat(n)
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

func newHeaderFormat(n int) string { return ">" + strings.Repeat("d", headerFields(n)) }

func headerFormat(n int) string {
	if n < len(headerFormats) {
		return headerFormats[n]
	}
	return newHeaderFormat(n)
}

// headerFields is the number of doubles in the header of n windows.
func headerFields(n int) int { return redislayout.HeaderFields(n) }

// header is a log header as the scripts write it (redislayout.Header).
type header string

// field returns field f (an h* constant).
func (h header) field(f int) int64 { return redislayout.Header(h).Field(f) }

// window returns field f (a w* constant) of window i, from 0.
func (h header) window(i, f int) int64 { return redislayout.Header(h).Window(i, f) }
