package usage_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/usage"
)

// TestMain stops the servers the tests started for the whole binary.
func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

var t0 = time.Date(2026, 3, 10, 22, 0, 0, 0, time.UTC)

// rows are the rows recorded by the tests: two keys of customer 7 and an
// anonymous network, over an hour and a day boundary.
func rows() []usage.Row {
	return []usage.Row{
		{Identity: "{customer:7}key:1", KeyID: 1, CustomerID: 7, Start: t0, Route: "tiles", Layer: "roads", Requests: 3, Charged: 30, GivenBack: 4, Overage: 6},
		{Identity: "{customer:7}key:1", KeyID: 1, CustomerID: 7, Start: t0, Route: "tiles", Layer: "places", Requests: 1, Charged: 10, Refused429: 1},
		{Identity: "{customer:7}key:1", KeyID: 1, CustomerID: 7, Start: t0.Add(time.Hour), Route: "within", Layer: "places", Requests: 2, Charged: 8, Unmetered: 4, Overage: 2, Refused422: 1},
		{Identity: "{customer:7}key:1", KeyID: 1, CustomerID: 7, Start: t0.Add(2 * time.Hour), Route: "tiles", Layer: "roads", Requests: 5, Charged: 50, GivenBack: 45, Overage: 5},
		{Identity: "{customer:7}key:2", KeyID: 2, CustomerID: 7, Start: t0, Route: "tiles", Layer: "roads", Requests: 1, Charged: 10},
		{Identity: "ip:203.0.113.0/24", Start: t0, Route: "tiles", Layer: "roads", Requests: 1, Charged: 10},
	}
}

// readers returns the in-process reader and the PostgreSQL one, each
// holding rows(): the latter written by the ledger's flush.
func readers(t *testing.T) (map[string]usage.Reader, *usage.Postgres) {
	t.Helper()
	mem := usage.NewMemory(365*24*time.Hour, 0, func() time.Time { return t0 })
	pool := spatialtest.Migrated(t)
	l := ledger.New(pool, ledger.Options{})
	for _, r := range rows() {
		mem.AddUsage(r)
		l.AddUsage(r)
	}
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	pg := usage.NewPostgres(pool)
	return map[string]usage.Reader{"memory": mem, "postgres": pg}, pg
}

func settled(rs []usage.Row) (requests, units, overage int64) {
	for _, r := range rs {
		requests += r.Requests
		units += r.Settled()
		overage += r.Overage
	}
	return requests, units, overage
}

// Both readers select by key and customer, sum by hour or UTC day, and
// group by route or layer alike.
func TestUsageQueries(t *testing.T) {
	rs, _ := readers(t)
	day := t0.Truncate(24 * time.Hour)
	cases := []struct {
		name                    string
		q                       usage.Query
		rows                    int
		requests, unit, overage int64
	}{
		{"key by hour", usage.Query{KeyID: 1, From: t0, To: t0.Add(3 * time.Hour), By: usage.ByHour}, 3, 11, 49, 13},
		{"key by hour, layer", usage.Query{KeyID: 1, From: t0, To: t0.Add(3 * time.Hour), By: usage.ByHour, Group: usage.GroupLayer}, 4, 11, 49, 13},
		{"key by hour, one hour", usage.Query{KeyID: 1, From: t0.Add(time.Hour), To: t0.Add(2 * time.Hour), By: usage.ByHour}, 1, 2, 8, 2},
		// 22:00 and 23:00 fall in the 10th, 00:00 in the 11th.
		{"key by day", usage.Query{KeyID: 1, From: day, To: day.Add(48 * time.Hour), By: usage.ByDay}, 2, 11, 49, 13},
		{"customer by day", usage.Query{CustomerID: 7, From: day, To: day.Add(48 * time.Hour), By: usage.ByDay}, 3, 12, 59, 13},
		{"everyone by day, route", usage.Query{From: day, To: day.Add(48 * time.Hour), By: usage.ByDay, Group: usage.GroupRoute}, 5, 13, 69, 13},
	}
	for name, r := range rs {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				got, err := r.Usage(context.Background(), c.q)
				if err != nil {
					t.Fatal(err)
				}
				n, u, o := settled(got)
				if len(got) != c.rows || n != c.requests || u != c.unit || o != c.overage {
					t.Errorf("%d rows, %d requests, %d units, %d overage; want %d, %d, %d, %d: %+v", len(got), n, u, o, c.rows, c.requests, c.unit, c.overage, got)
				}
			})
		}
	}
}

// Hours of the days past the retention move to usage_daily whole: a query
// by day reads the same before and after, one by hour no longer sees
// them, and a second rollup changes nothing.
func TestRollup(t *testing.T) {
	_, pg := readers(t)
	ctx := context.Background()
	day := t0.Truncate(24 * time.Hour)
	q := usage.Query{CustomerID: 7, From: day, To: day.Add(48 * time.Hour), By: usage.ByDay, Group: usage.GroupLayer}
	before, err := pg.Usage(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	// Now is 2 days and an hour after the 11th began, the retention one
	// day: the 10th is rolled up, the 11th (its cutoff's day) is kept.
	now := day.Add(49 * time.Hour)
	for range 2 {
		if _, err := pg.Rollup(ctx, now, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	after, err := pg.Usage(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(after) {
		t.Fatalf("by day: %d rows before the rollup, %d after", len(before), len(after))
	}
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("by day, row %d: %+v before the rollup, %+v after", i, before[i], after[i])
		}
	}
	hours, err := pg.Usage(ctx, usage.Query{CustomerID: 7, From: day, To: day.Add(48 * time.Hour), By: usage.ByHour})
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 1 || !hours[0].Start.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("by hour after the rollup: %+v, want only the hour of the 11th", hours)
	}
}

// A Memory holds at most its bound of rows, forgetting hours past its
// retention first.
func TestMemoryBound(t *testing.T) {
	now := t0
	m := usage.NewMemory(2*time.Hour, 2, func() time.Time { return now })
	add := func(at time.Time) {
		m.AddUsage(usage.Row{Identity: "key:1", KeyID: 1, Start: at, Route: "tiles", Requests: 1})
	}
	add(t0)
	add(t0.Add(time.Hour))
	add(t0.Add(2 * time.Hour))
	if m.Dropped() != 1 {
		t.Errorf("dropped %d, want 1 (the bound reached, nothing past the retention)", m.Dropped())
	}
	now = t0.Add(3 * time.Hour)
	add(t0.Add(3 * time.Hour))
	if m.Dropped() != 1 {
		t.Errorf("dropped %d, want still 1: the hour past the retention gives its place", m.Dropped())
	}
	got, _ := m.Usage(context.Background(), usage.Query{KeyID: 1, From: t0, To: t0.Add(4 * time.Hour), By: usage.ByHour})
	if len(got) != 2 || !got[1].Start.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("rows %+v, want 23:00 and 01:00", got)
	}
}
