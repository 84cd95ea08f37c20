package billing

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/ledger"
	"github.com/tileapi/tileapi/internal/param"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/usage"
)

func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }

// The fixture's clock: 12:03 on 2 November 2026, so with the default
// grace the last closed hour is 10:00 (11:00 closed only three minutes
// ago, 12:00 is open).
var (
	now  = time.Date(2026, 11, 2, 12, 3, 0, 0, time.UTC)
	h10  = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	h11  = h10.Add(time.Hour)
	day1 = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
)

// insert writes r into usage_hourly, or usage_daily if day.
func insert(t *testing.T, pool *pgxpool.Pool, r usage.Row, day bool) {
	t.Helper()
	var key, customer any
	if r.KeyID != 0 {
		key = r.KeyID
	}
	if r.CustomerID != 0 {
		customer = r.CustomerID
	}
	sql := `INSERT INTO usage_hourly (identity, key_id, customer_id, hour, route, layer, units_charged, units_given_back, units_overage) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	start := any(r.Start)
	if day {
		sql = `INSERT INTO usage_daily (identity, key_id, customer_id, day, route, layer, units_charged, units_given_back, units_overage) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
		start = r.Start.Format(time.DateOnly)
	}
	if _, err := pool.Exec(context.Background(), sql, r.Identity, key, customer, start, r.Route, r.Layer, r.Charged, r.GivenBack, r.Overage); err != nil {
		t.Fatal(err)
	}
}

// fixture is a database with usage of two keys, one with a customer, in
// a closed hour, an hour not yet closed and a day rolled up, and usage
// without a key.
func fixture(t *testing.T) *Postgres {
	pool := spatialtest.Migrated(t)
	insert(t, pool, usage.Row{Identity: "{customer:7}key:42", KeyID: 42, CustomerID: 7, Start: h10, Route: "tiles", Layer: "places", Charged: 100, GivenBack: 30, Overage: 20}, false)
	insert(t, pool, usage.Row{Identity: "key:43", KeyID: 43, Start: h10, Route: "within", Charged: 5}, false)
	insert(t, pool, usage.Row{Identity: "ip:203.0.113.0/24", Start: h10, Route: "tiles", Layer: "places", Charged: 9}, false)
	insert(t, pool, usage.Row{Identity: "key:43", KeyID: 43, Start: h11, Route: "within", Charged: 8}, false)
	insert(t, pool, usage.Row{Identity: "key:43", KeyID: 43, Start: day1, Route: "tiles", Layer: "countries", Charged: 1000, GivenBack: 1000}, true)
	return NewPostgres(pool)
}

// export writes the events of the fixture's whole range in f.
func export(t *testing.T, p *Postgres, f Format) []byte {
	t.Helper()
	q, err := ParseQuery("2026-09-01", "2026-11-03", now, DefaultGrace)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := p.Events(context.Background(), q, f.Settled())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, f, evs, Options{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// want are the events of the fixture in the order exported: the rolled up
// day, then the closed hour; never the hour closed less than the grace
// ago, nor the usage without a key.
var want = []struct {
	kind    Kind
	period  string
	start   time.Time
	subject string
	route   string
	layer   string
	units   int64
}{
	{Usage, "day", day1, "key:43", "tiles", "countries", 1000},
	{Adjustment, "day", day1, "key:43", "tiles", "countries", -1000},
	{Usage, "hour", h10, "key:43", "within", "", 5},
	{Usage, "hour", h10, "customer:7", "tiles", "places", 100},
	{Adjustment, "hour", h10, "customer:7", "tiles", "places", -30},
	{Overage, "hour", h10, "customer:7", "tiles", "places", 20},
}

func TestCloudEventsReadBackBySDK(t *testing.T) {
	out := export(t, fixture(t), CloudEvents)
	var evs []event.Event // the CloudEvents SDK's own reader of the JSON format
	if err := json.Unmarshal(out, &evs); err != nil {
		t.Fatalf("the CloudEvents SDK cannot read the batch: %v\n%s", err, out)
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(evs), len(want), out)
	}
	ids := map[string]bool{}
	for i, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %d is not a valid CloudEvent: %v", i, err)
		}
		var d eventData
		if err := e.DataAs(&d); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		typ := DefaultType
		if w.kind == Overage {
			typ = OverageType
		}
		if e.SpecVersion() != "1.0" || e.Type() != typ || e.Source() != DefaultSource || e.DataContentType() != "application/json" ||
			e.Subject() != w.subject || !e.Time().Equal(w.start) || d.Kind != w.kind || d.Period != w.period ||
			d.Route != w.route || d.Layer != w.layer || d.Units != w.units {
			t.Errorf("event %d = %s %s %s %s %s %v %+v, want %+v", i, e.SpecVersion(), e.Type(), e.Source(), e.Subject(), e.DataContentType(), e.Time(), d, w)
		}
		if (d.CustomerID != nil) != (w.subject == "customer:7") || d.CustomerID != nil && *d.CustomerID != 7 {
			t.Errorf("event %d: customer_id %v", i, d.CustomerID)
		}
		if want := EventID(w.kind, w.period, d.Identity, w.start, w.route, w.layer); e.ID() != want {
			t.Errorf("event %d: id %s, want %s", i, e.ID(), want)
		}
		ids[e.ID()] = true
	}
	if len(ids) != len(evs) {
		t.Errorf("%d distinct ids in %d events", len(ids), len(evs))
	}
}

func TestCSVParsedBack(t *testing.T) {
	out := export(t, fixture(t), CSV)
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want)+1 || !slices.Equal(recs[0], csvHeader) {
		t.Fatalf("csv:\n%s", out)
	}
	for i, w := range want {
		r := recs[i+1]
		units, err := strconv.ParseInt(r[10], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if r[1] != string(w.kind) || r[2] != w.period || r[3] != w.start.Format(time.RFC3339) || r[4] != w.subject ||
			r[8] != w.route || r[9] != w.layer || units != w.units {
			t.Errorf("row %d = %q, want %+v", i+1, r, w)
		}
	}
	if recs[4][7] != "7" || recs[3][7] != "" {
		t.Errorf("customer_id column: %q, %q", recs[4][7], recs[3][7])
	}
}

func TestStripeSendsUnitsAsSettled(t *testing.T) {
	out := export(t, fixture(t), Stripe)
	var got []stripeEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var e stripeEvent
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		got = append(got, e)
	}
	// The day's units were all given back: settled at zero, nothing is
	// sent for it. The overage goes to a meter of its own.
	if len(got) != 3 {
		t.Fatalf("%d meter events, want 3:\n%s", len(got), out)
	}
	for i, w := range []struct{ meter, customer, value, route string }{
		{DefaultEventName, "key:43", "5", "within"}, {DefaultEventName, "customer:7", "70", "tiles"}, {DefaultOverageEventName, "customer:7", "20", "tiles"},
	} {
		e := got[i]
		if e.EventName != w.meter || e.Timestamp != h10.Unix() || e.Payload.StripeCustomerID != w.customer ||
			e.Payload.Value != w.value || e.Payload.Route != w.route || len(e.Identifier) != 32 {
			t.Errorf("meter event %d = %+v, want %+v", i, e, w)
		}
	}
}

// A second export of the same range is the same bytes, ids included; a
// row written since in another hour adds its events and changes no id.
func TestReExportIsIdentical(t *testing.T) {
	p := fixture(t)
	for _, f := range formats {
		if a, b := export(t, p, f), export(t, p, f); !bytes.Equal(a, b) {
			t.Errorf("%s: two exports differ:\n%s\n%s", f, a, b)
		}
	}
	before := csvIDs(t, export(t, p, CSV))
	insert(t, p.pool, usage.Row{Identity: "key:44", KeyID: 44, Start: h10.Add(-time.Hour), Route: "contains", Charged: 2}, false)
	after := csvIDs(t, export(t, p, CSV))
	kept := slices.DeleteFunc(slices.Clone(after), func(id string) bool { return !slices.Contains(before, id) })
	if len(after) != len(before)+1 || !slices.Equal(kept, before) {
		t.Errorf("ids before %q, after %q", before, after)
	}
}

func TestEventIDDependsOnEveryField(t *testing.T) {
	base := EventID(Usage, "hour", "key:42", h10, "tiles", "places")
	if again := EventID(Usage, "hour", "key:42", h10.In(time.FixedZone("X", 3600)), "tiles", "places"); again != base {
		t.Errorf("the same hour in another zone: %s, want %s", again, base)
	}
	for name, id := range map[string]string{
		"kind":     EventID(Adjustment, "hour", "key:42", h10, "tiles", "places"),
		"period":   EventID(Usage, "day", "key:42", h10, "tiles", "places"),
		"identity": EventID(Usage, "hour", "key:43", h10, "tiles", "places"),
		"hour":     EventID(Usage, "hour", "key:42", h11, "tiles", "places"),
		"route":    EventID(Usage, "hour", "key:42", h10, "within", "places"),
		"layer":    EventID(Usage, "hour", "key:42", h10, "tiles", "counties"),
		"boundary": EventID(Usage, "hour", "key:42", h10, "tiles\x00", "places"),
	} {
		if id == base {
			t.Errorf("another %s, the same id %s", name, id)
		}
	}
}

func TestParseQuery(t *testing.T) {
	for _, c := range []struct {
		from, to string
		field    string // of the error; "" for none
		want     Query
	}{
		{from: "2026-11-01", to: "2026-11-02", want: Query{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)}},
		{from: "2026-11-02T09:00:00+01:00", want: Query{From: time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC), To: h11}},
		{from: "2026-11-01", to: "2026-11-05", want: Query{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: h11}}, // the open hours left out
		{from: "", field: "from"},
		{from: "yesterday", field: "from"},
		{from: "2026-11-01T10:30:00Z", field: "from"},
		{from: "2026-11-01", to: "2026-11-01", field: "to"},
		{from: "2026-11-01", to: "2026-11-01T10:00:01Z", field: "to"},
	} {
		q, err := ParseQuery(c.from, c.to, now, DefaultGrace)
		var pe *param.Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%q %q: %v", c.from, c.to, err)
		case c.field == "" && (!q.From.Equal(c.want.From) || !q.To.Equal(c.want.To)):
			t.Errorf("%q %q: %v to %v, want %v to %v", c.from, c.to, q.From, q.To, c.want.From, c.want.To)
		case c.field != "" && (!errors.As(err, &pe) || pe.Field != c.field):
			t.Errorf("%q %q: error %v, want one naming %s", c.from, c.to, err, c.field)
		}
	}
	if _, err := ParseFormat("json"); err == nil || err.Error() != "invalid format: must be cloudevents, csv or stripe" {
		t.Errorf("ParseFormat(json): %v", err)
	}
}

// csvIDs are the ids of a CSV export.
func csvIDs(t *testing.T, out []byte) []string {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs[1:] {
		ids = append(ids, r[0])
	}
	return ids
}

// Rows written by the usage ledger's batches (the servers' writer) are
// exported by hour; once the usage history rolls their day up, by day,
// with the same units as settled under ids of their own (the trap
// docs/billing.md warns of: export well inside the retention).
func TestExportOfTheLedgersRowsAndTheirRollup(t *testing.T) {
	ctx := context.Background()
	pool := spatialtest.Migrated(t)
	day := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	led := ledger.New(pool, ledger.Options{})
	led.AddUsage(usage.Row{Identity: "key:9", KeyID: 9, Start: day.Add(3 * time.Hour), Route: "tiles", Layer: "places", Requests: 2, Charged: 12, GivenBack: 2})
	led.AddUsage(usage.Row{Identity: "key:9", KeyID: 9, Start: day.Add(5 * time.Hour), Route: "tiles", Layer: "places", Requests: 1, Charged: 7})
	if err := led.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p := NewPostgres(pool)
	q := Query{From: day, To: day.Add(24 * time.Hour)}
	sum := func(evs []Event) (units int64, ids []string) {
		for _, e := range evs {
			units += e.Units
			ids = append(ids, e.ID)
		}
		return units, ids
	}
	hours, err := p.Events(ctx, q, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 3 || hours[0].Period != usage.ByHour {
		t.Fatalf("by hour: %+v", hours)
	}
	if _, err := usage.NewPostgres(pool).Rollup(ctx, day.Add(48*time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	days, err := p.Events(ctx, q, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 2 || days[0].Period != usage.ByDay || !days[0].Start.Equal(day) || days[0].Units != 19 || days[1].Units != -2 {
		t.Fatalf("by day: %+v", days)
	}
	hu, hids := sum(hours)
	du, dids := sum(days)
	if hu != 17 || du != hu {
		t.Errorf("units as settled: %d by hour, %d by day, want 17", hu, du)
	}
	for _, id := range dids {
		if slices.Contains(hids, id) {
			t.Errorf("a day event has an hour's id %s", id)
		}
	}
}
