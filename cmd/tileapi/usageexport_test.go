package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

// usageExport runs tileapi usage export with args on the database getenv
// names.
func usageExport(getenv func(string) string, args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	err = run(context.Background(), append([]string{"tileapi", "usage", "export"}, args...), getenv, &out, &errb)
	return out.String(), errb.String(), err
}

// tileapi usage export writes a file of CSV that encoding/csv reads back,
// the same bytes when run again, with the charge and the refund of a
// closed hour as a usage and a negative adjustment, and none of the hour
// still open.
func TestUsageExportCommand(t *testing.T) {
	dbURL := spatialtest.Schema(t)
	getenv := func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] }
	migrate(t, getenv)
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	closed := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	open := time.Now().UTC().Truncate(time.Hour)
	for _, h := range []time.Time{closed, open} {
		_, err := conn.Exec(context.Background(), `INSERT INTO usage_hourly (identity, key_id, hour, route, layer, units_charged, units_given_back)
			VALUES ('key:5', 5, $1, 'within', 'places', 40, 15)`, h)
		if err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "usage.csv")
	from := closed.Add(-24 * time.Hour).Format(time.RFC3339)
	var runs [][]byte
	for range 2 {
		if _, stderr, err := usageExport(getenv, "-from", from, "-format", "csv", "-o", file); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, b)
	}
	if !bytes.Equal(runs[0], runs[1]) {
		t.Errorf("two runs differ:\n%s\n%s", runs[0], runs[1])
	}
	recs, err := csv.NewReader(bytes.NewReader(runs[0])).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[1][1] != "usage" || recs[1][10] != "40" || recs[2][1] != "adjustment" || recs[2][10] != "-15" ||
		recs[1][3] != closed.Format(time.RFC3339) || recs[1][0] == recs[2][0] {
		t.Errorf("export:\n%s", runs[0])
	}
	// stdout, as Stripe meter events: one, the units as settled.
	out, _, err := usageExport(getenv, "-from", from, "-format", "stripe")
	if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"value":"25"`) || !strings.Contains(out, `"stripe_customer_id":"key:5"`) {
		t.Errorf("stripe: %v\n%s", err, out)
	}
}

// A bad flag is one line naming it, before any database is opened.
func TestUsageExportFlags(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage export: invalid -from: is required"},
		{[]string{"-from", "last week"}, "usage export: invalid -from: must be an RFC 3339 time on the hour"},
		{[]string{"-from", "2026-11-01T10:15:00Z"}, "usage export: invalid -from: must be on the hour"},
		{[]string{"-from", "2026-11-02", "-to", "2026-11-01"}, "usage export: invalid -to: must be after from"},
		{[]string{"-from", "2026-11-01", "-format", "json"}, "usage export: invalid -format: must be cloudevents, csv or stripe"},
		{[]string{"-from", "2026-11-01", "-key", "-3"}, "usage export: -key and -customer are positive ids"},
		{[]string{"-from", "2026-11-01"}, "usage export: no database: set DATABASE_URL or -database-url"},
	} {
		_, _, err := usageExport(getenv, c.args...)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line starting %q", c.args, err, c.want)
		}
	}
}
