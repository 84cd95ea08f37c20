package usage

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// DefaultMaxRows bounds the rows a Memory holds.
const DefaultMaxRows = 100_000

// Memory keeps usage history in process, for a server without PostgreSQL:
// hourly rows for the retention, at most maxRows of them. A row of an
// hour past the retention is forgotten (there is no daily rollup in
// process); past maxRows, a row not yet held is dropped and counted
// (Dropped). It is safe for concurrent use.
type Memory struct {
	retention time.Duration
	maxRows   int
	now       func() time.Time

	mu      sync.Mutex
	rows    map[Key]Row
	dropped int64
}

// NewMemory returns a Memory keeping retention of hours, at most maxRows
// rows (DefaultMaxRows if not positive), reading the time from now
// (time.Now if nil).
func NewMemory(retention time.Duration, maxRows int, now func() time.Time) *Memory {
	if maxRows <= 0 {
		maxRows = DefaultMaxRows
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{retention: retention, maxRows: maxRows, now: now, rows: make(map[Key]Row)}
}

// AddUsage adds r to the row of its identity, hour, route and layer.
func (m *Memory) AddUsage(r Row) {
	k := KeyOf(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	if held, ok := m.rows[k]; ok {
		held.Add(r)
		m.rows[k] = held
		return
	}
	if len(m.rows) >= m.maxRows {
		m.forget()
		if len(m.rows) >= m.maxRows {
			m.dropped++
			return
		}
	}
	m.rows[k] = r
}

// forget deletes the rows of hours past the retention.
func (m *Memory) forget() {
	cutoff := m.now().Add(-m.retention)
	for k := range m.rows {
		if k.Start.Before(cutoff) {
			delete(m.rows, k)
		}
	}
}

// Dropped returns how many rows were dropped for the bound on rows.
func (m *Memory) Dropped() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// Usage returns the rows q selects, summed as q says, in the order of
// their start, identity, route and layer.
func (m *Memory) Usage(_ context.Context, q Query) ([]Row, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	sums := make(map[Key]Row)
	m.mu.Lock()
	for _, r := range m.rows {
		if r.Start.Before(q.From) || !r.Start.Before(q.To) ||
			(q.KeyID != 0 && r.KeyID != q.KeyID) || (q.CustomerID != 0 && r.CustomerID != q.CustomerID) {
			continue
		}
		r = q.bucket(r)
		k := KeyOf(r)
		if s, ok := sums[k]; ok {
			s.Add(r)
			r = s
		}
		sums[k] = r
	}
	m.mu.Unlock()
	out := make([]Row, 0, len(sums))
	for _, r := range sums {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Row) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Identity, b.Identity),
			cmp.Compare(a.Route, b.Route), cmp.Compare(a.Layer, b.Layer))
	})
	return out, nil
}

// bucket returns r as a row of q's span and grouping: its start that of
// its day for ByDay, its route and layer kept as q.Group says.
func (q Query) bucket(r Row) Row {
	if q.By == ByDay {
		r.Start = r.Start.UTC().Truncate(24 * time.Hour)
	}
	switch q.Group {
	case GroupNone:
		r.Route, r.Layer = "", ""
	case GroupRoute:
		r.Layer = ""
	}
	return r
}

var (
	_ Reader   = (*Memory)(nil)
	_ Recorder = (*Memory)(nil)
)
