package quota

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The layout of an identity's log in Redis, defined once here: Go reads it
// with these names (ReadLog), and both scripts are written with them
// (luaScript), so neither writes a position as a bare number.
//
// The log is one string: fixed-width records, one per admitted charge in
// admit order (which is time order), then a header of doubles. A script
// reads the last chunk bytes (the header, the newest records, all of a
// small log) with one GETRANGE; new records are written at the tail
// together with the header, in one SETRANGE; records leave from the head as
// their windows slide past them, and once as many have left as remain, the
// string is rewritten without them (amortised O(1)).
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
	wWindow     = 1 + iota // the window, microseconds
	wSum                   // the cost of the records inside it
	wHead                  // the string index of its oldest record of nonzero cost; hTail if none
	wOldest                // that record's admit time; -1 if the window is empty
	wOldestCost            // that record's cost, so that its leaving reads no record
	hPer        = wOldestCost
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

// recordPattern is the struct format of a record, given the widths of its
// time offset and its cost (string.format in Lua, fmt.Sprintf in Go).
const recordPattern = ">I%dI%d"

// compactAfter is the fewest records that must have left every window
// before the log is rewritten without them.
const compactAfter = 16

// chunk is the bytes a script reads from the end of a log at once: the
// header and the newest records, and the whole of a small log.
const chunk = 4096

//go:embed log.lua
var logLua string

// luaConstants are the layout's names as the scripts spell them.
var luaConstants = map[string]string{
	"LAST": strconv.Itoa(hLast), "BASE": strconv.Itoa(hBase), "FIRST": strconv.Itoa(hFirst),
	"TAIL": strconv.Itoa(hTail), "LIVE": strconv.Itoa(hLive), "TB": strconv.Itoa(hTB), "CB": strconv.Itoa(hCB),
	"SHARED": strconv.Itoa(hShared), "PER": strconv.Itoa(hPer),
	"WINDOW": strconv.Itoa(wWindow), "SUM": strconv.Itoa(wSum), "HEAD": strconv.Itoa(wHead), "OLDEST": strconv.Itoa(wOldest),
	"OLDEST_COST": strconv.Itoa(wOldestCost),
	"A_RECORD":    strconv.Itoa(aRecord), "A_COST": strconv.Itoa(aCost), "A_NOW": strconv.Itoa(aNow),
	"A_TB": strconv.Itoa(aTB), "A_CB": strconv.Itoa(aCB), "A_N": strconv.Itoa(aN), "A_DEADLINE": strconv.Itoa(aDeadline),
	"A_SHARED": strconv.Itoa(aShared), "A_PER": strconv.Itoa(aPer),
	"COMPACT_AFTER":  strconv.Itoa(compactAfter),
	"CHUNK_START":    strconv.Quote(strconv.Itoa(-chunk)),
	"RECORD_PATTERN": strconv.Quote(recordPattern),
	"LATE":           strconv.Quote(lateReply),
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
	var wmax time.Duration
	for _, l := range p.Limits {
		wmax = max(wmax, l.Window)
	}
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

// header is a log header as the scripts write it, packed doubles.
type header string

// field returns field f (an h* constant).
func (h header) field(f int) int64 {
	return int64(math.Float64frombits(binary.BigEndian.Uint64([]byte(h[8*(f-1) : 8*f]))))
}

// window returns field f (a w* constant) of window i, from 0.
func (h header) window(i, f int) int64 { return h.field(hShared + hPer*i + f) }

// parseLog reads a whole log string: every record it still holds, including
// those that have left every window but await the rewrite.
func parseLog(s string) ([]LogEntry, error) {
	if len(s) < 8 {
		return nil, fmt.Errorf("quota: log of %d bytes has no header", len(s))
	}
	n := int(header(s[len(s)-8:]).field(1))
	size := 8 * headerFields(n)
	if n < 1 || size > len(s) {
		return nil, fmt.Errorf("quota: log of %d bytes has no header of %d windows", len(s), n)
	}
	h := header(s[len(s)-size:])
	tb, cb, base, first := int(h.field(hTB)), int(h.field(hCB)), h.field(hBase), h.field(hFirst)
	width, tail := tb+cb, int(h.field(hTail))
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
