package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/billing"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// withBilling serves the usage export from pool.
func withBilling(pool *pgxpool.Pool) option {
	return with(func(c *Config) { c.Billing = billing.NewPostgres(pool) })
}

// usagePool is a migrated database with usage of key 42 of customer 7
// in an hour closed two hours ago: 100 units charged, 30 given back.
func usagePool(t *testing.T) (*pgxpool.Pool, time.Time) {
	pool := spatialtest.Migrated(t)
	hour := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	_, err := pool.Exec(context.Background(), `INSERT INTO usage_hourly (identity, key_id, customer_id, hour, route, layer, units_charged, units_given_back)
		VALUES ('{customer:7}key:42', 42, 7, $1, 'tiles', 'places', 100, 30)`, hour)
	if err != nil {
		t.Fatal(err)
	}
	return pool, hour
}

// The pull endpoint's CloudEvents are read back by the CloudEvents SDK's
// HTTP binding, as a batch (application/cloudevents-batch+json); the
// refund is a negative adjustment with an id of its own; a second pull is
// the same bytes.
func TestUsageExportCloudEventsOverHTTP(t *testing.T) {
	pool, hour := usagePool(t)
	e := newEnv(t, withBilling(pool))
	path := "/admin/usage/export?from=" + hour.Add(-time.Hour).Format(time.RFC3339)
	resp := send(t, e.admin, "GET", path, nil, adminAuth...)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v %s", resp.StatusCode, err, body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	evs, err := cehttp.NewEventsFromHTTPResponse(resp)
	if err != nil {
		t.Fatalf("the CloudEvents SDK cannot read the response: %v\n%s", err, body)
	}
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2:\n%s", len(evs), body)
	}
	for i, want := range []int64{100, -30} {
		ev := evs[i]
		if err := ev.Validate(); err != nil {
			t.Error(err)
		}
		var d struct {
			Kind  string `json:"kind"`
			Units int64  `json:"units"`
		}
		if err := ev.DataAs(&d); err != nil {
			t.Fatal(err)
		}
		if d.Units != want || ev.Subject() != "customer:7" || !ev.Time().Equal(hour) {
			t.Errorf("event %d: %s %v %+v, want %d units", i, ev.Subject(), ev.Time(), d, want)
		}
	}
	if evs[0].ID() == evs[1].ID() {
		t.Errorf("usage and adjustment share the id %s", evs[0].ID())
	}
	again := send(t, e.admin, "GET", path, nil, adminAuth...)
	body2, _ := io.ReadAll(again.Body)
	again.Body.Close()
	if !bytes.Equal(body, body2) {
		t.Errorf("two pulls differ:\n%s\n%s", body, body2)
	}
}

// registerJSONLines lets kin-openapi read a JSON Lines body as an array
// of its lines, so the contract holds each Stripe meter event against
// its schema.
var registerJSONLines = sync.OnceFunc(func() {
	openapi3filter.RegisterBodyDecoder("application/jsonl", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		var lines []any
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			var v any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				return nil, err
			}
			lines = append(lines, v)
		}
		return lines, sc.Err()
	})
})

// The usage export's statuses, each by GET and HEAD.
func contractUsageExport(t *testing.T, c *contract, backend []option) {
	registerJSONLines()
	pool, hour := usagePool(t)
	e := newEnv(t, append(backend, withBilling(pool))...)
	day := hour.Add(-time.Hour).Format(time.DateOnly) // a midnight before the hour
	from := "/admin/usage/export?from=" + day
	for _, x := range []exchange{
		adminCall("GET", from, "", 200),
		adminCall("GET", from+"&format=cloudevents&customer=7", "", 200),
		adminCall("GET", from+"&format=csv&key=42", "", 200),
		adminCall("GET", from+"&format=stripe", "", 200),
		adminCall("GET", from+"&to="+hour.Format(time.RFC3339), "", 200), // empty: the range ends before the hour
		{admin: true, method: "GET", path: from + "&format=json", headers: adminAuth, status: 400, refused: true},
		{admin: true, method: "GET", path: "/admin/usage/export?format=csv", headers: adminAuth, status: 400, refused: true},
		{admin: true, method: "GET", path: from + "&key=0", headers: adminAuth, status: 400, refused: true},
		adminCall("GET", "/admin/usage/export?from=yesterday", "", 400),
		adminCall("GET", "/admin/usage/export?from=2026-11-01T10:30:00Z", "", 400),
		adminCall("GET", from+"&to="+day, "", 400),
		{admin: true, method: "GET", path: from, status: 401},
	} {
		c.both(t, e, x)
	}
	for range adminFailures {
		send(t, e.admin, "GET", from, nil, "Authorization", "Bearer wrong")
	}
	c.both(t, e, adminCall("GET", from, "", 429))
	c.both(t, newEnv(t, backend...), adminCall("GET", from, "", 404)) // no usage history
	c.both(t, newEnv(t, append(backend, withBilling(deadPostgres(t)))...), adminCall("GET", from, "", 503))
}

// A bad parameter is a 400 naming it.
func TestUsageExportNamesTheBadField(t *testing.T) {
	pool, hour := usagePool(t)
	e := newEnv(t, withBilling(pool))
	from := "from=" + hour.Format(time.DateOnly)
	for _, c := range []struct{ query, field string }{
		{"format=csv", "from"},
		{"from=2026-13-01", "from"},
		{from + "&to=" + hour.Format(time.DateOnly), "to"},
		{from + "&format=xml", "format"},
		{from + "&key=x", "key"},
		{from + "&customer=-1", "customer"},
	} {
		resp := send(t, e.admin, "GET", "/admin/usage/export?"+c.query, nil, adminAuth...)
		var p struct{ Code, Field, Detail string }
		err := json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 400 || p.Code != "invalid-parameter" || p.Field != c.field || !strings.Contains(p.Detail, c.field) {
			t.Errorf("%s: %d %+v %v, want a 400 naming %s", c.query, resp.StatusCode, p, err, c.field)
		}
	}
}
