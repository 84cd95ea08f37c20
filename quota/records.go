package quota

import (
	"context"
	"time"

	"github.com/tileapi/tileapi/quota/internal/redislayout"
)

// Record is one admitted charge as a Redis store's log holds it.
type Record struct {
	// Index counts the identity's admitted charges since its log began:
	// with At, it names the charge across reads of the log.
	Index int64
	// At is when it was admitted, by the Redis server's clock.
	At time.Time
	// Cost is the units it holds: 0 once refunded.
	Cost int64
}

// Records returns what identity's log holds: every charge still inside one
// of its windows (refunded ones at cost 0), and perhaps some that have left
// them all but await the log's next rewrite. It is for audits, such as a
// load test's check that no window ever held more than its maximum; the
// quota's decisions never need it.
func (s *Redis) Records(ctx context.Context, identity string) ([]Record, error) {
	entries, err := redislayout.Read(ctx, s.client, s.LogKey(identity))
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(entries))
	for i, e := range entries {
		out[i] = Record{Index: e.Index, At: time.UnixMicro(e.At), Cost: e.Cost}
	}
	return out, nil
}

// LogKey returns the Redis key of identity's log: the string that holds
// its charges in the sliding windows, and the key a decision's script
// runs on. It is for operators, to find an identity in Redis (MEMORY
// USAGE, OBJECT, a key's slot in a cluster); read the log with Records,
// not by hand, and clear an identity with Reset, which also deletes its
// calendar counters, kept in a key beside it (same hash tag).
func (s *Redis) LogKey(identity string) string { return s.key(identity) }
