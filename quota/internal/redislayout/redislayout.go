// Package redislayout is the layout of a quota.Redis store's keys and log,
// defined once: package quota writes it (its Lua scripts run quota's
// layout.lua first, generated from these constants: each a Lua local of its
// name here), and audits read it back, such as the load tool's exactness
// verdict. It is internal because the layout is not part of quota's API: it
// changes with the scripts, and each change takes a new key version (see
// LogKey), so a store never reads a log of another layout.
//
// The log is one string: room for a number of fixed-width records (Cap),
// filled in admit order (which is time order), then a header of doubles.
// A script reads the last chunk of bytes (the header, the newest records,
// all of a small log) with one GETRANGE; a new record is written into the
// room, and the header rewritten in place: the string keeps its length, so
// Redis never grows it (a string that grows at its end below 1 MB doubles
// its allocation). Records leave from the head as their windows slide past
// them; when the room is full, or the records still in a window fill less
// than a quarter of it, the string is rewritten without the others, with
// room for half as many again (amortised O(1)).
//
// A record is the admit time minus the header's base, then the cost, both
// big-endian unsigned integers of as few bytes as the plan needs: most plans
// take 5 or 6 bytes a record. A refunded record keeps its place with cost 0,
// so receipts can name records by index.
package redislayout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/redis/go-redis/v9"
)

// The header's fields, numbered from 1 as in a Lua table unpacked from it.
const (
	Last    = 1 + iota // the latest time seen (microseconds); time never runs back from it
	Base               // the time record offsets count from
	First              // the index, counted since the log began, of the string's first record
	Tail               // the number of records in the string
	Live               // records before this one have left every window: they await the rewrite
	TB                 // the bytes of a record's time offset
	CB                 // the bytes of a record's cost
	Cap                // the records the string has room for: the header starts at Cap times the record width
	Expires            // when the log's TTL, as last set, ends (microseconds); 0 if unknown
	Shared  = Expires  // the number of fields shared by all windows
)

// Each window of the plan has Per fields after the shared ones: window i
// (from 1) holds field f at Shared + Per*(i-1) + f. After the windows comes
// one more double, the number of windows, so a header can be read from the
// end of the string without knowing its plan.
const (
	Window     = 1 + iota // the window, microseconds
	Sum                   // the cost of the records inside it
	Head                  // the string index of its oldest record of nonzero cost; Tail if none
	Oldest                // that record's admit time; -1 if the window is empty
	OldestCost            // that record's cost, so that its leaving reads no record
	Per        = OldestCost
)

// HeaderFields is the number of doubles in the header of n windows.
func HeaderFields(n int) int { return Shared + Per*n + 1 }

// Header is a log header as the scripts write it: packed big-endian doubles.
type Header string

// Field returns field f (Last, Base, ...).
func (h Header) Field(f int) int64 {
	return int64(math.Float64frombits(binary.BigEndian.Uint64([]byte(h[8*(f-1) : 8*f]))))
}

// Window returns field f (Window, Sum, ...) of window i, from 0.
func (h Header) Window(i, f int) int64 { return h.Field(WindowField(i, f)) }

// WindowField returns the header field that holds field f (Window, Sum,
// ...) of window i, from 0.
func WindowField(i, f int) int { return Shared + Per*i + f }

// LogKey returns the key of identity's log under prefix. It carries the
// escaped identity as its hash tag, so keys added beside it share its Redis
// Cluster slot; a member identity (Member) carries its group's tag, then
// "/" and the member escaped (colons too), so the keys of a group and of
// its members share one slot. Distinct identities have distinct keys. The
// "5" is the layout's version: keys of an older layout are never read, and
// expire on their own. (Counters keep version 3: their form has not
// changed.)
func LogKey(prefix, identity string) string { return Key(prefix, identity, ":l5") }

// CountersKey returns the key of identity's calendar counters under prefix:
// a hash of a field a period limit, each the start of its period and the
// units used in it. It shares the log's hash tag.
func CountersKey(prefix, identity string) string { return Key(prefix, identity, ":c3") }

// Entry is one admitted charge in a log.
type Entry struct {
	// Index counts the identity's admitted charges since its log began.
	Index int64
	// At is the admit time, microseconds since the Unix epoch.
	At int64
	// Cost is the units it holds; 0 once refunded.
	Cost int64
}

// Read returns the records of the log at key: every charge still in some
// window (refunded ones at cost 0), and perhaps some that have left all of
// them but await the log's next rewrite. A key that does not exist holds
// none.
func Read(ctx context.Context, c interface {
	Get(ctx context.Context, key string) *redis.StringCmd
}, key string) ([]Entry, error) {
	s, err := c.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("redislayout: read %s: %w", key, err)
	}
	return Parse(s)
}

// Parse reads a whole log string: every record it still holds, including
// those that have left every window but await the rewrite.
func Parse(s string) ([]Entry, error) {
	if len(s) < 8 {
		return nil, fmt.Errorf("redislayout: log of %d bytes has no header", len(s))
	}
	n := int(Header(s[len(s)-8:]).Field(1))
	size := 8 * HeaderFields(n)
	if n < 1 || size > len(s) {
		return nil, fmt.Errorf("redislayout: log of %d bytes has no header of %d windows", len(s), n)
	}
	h := Header(s[len(s)-size:])
	tb, cb, base, first := int(h.Field(TB)), int(h.Field(CB)), h.Field(Base), h.Field(First)
	width, tail, room := tb+cb, int(h.Field(Tail)), int(h.Field(Cap))
	if tb < 1 || cb < 1 || tail > room || room*width != len(s)-size {
		return nil, fmt.Errorf("redislayout: log of %d bytes: %d records of %d+%d bytes (room for %d) do not fit", len(s), tail, tb, cb, room)
	}
	out := make([]Entry, tail)
	for i := range out {
		r := s[i*width : (i+1)*width]
		out[i] = Entry{Index: first + int64(i), At: base + int64(getUint(r[:tb])), Cost: int64(getUint(r[tb:]))}
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
