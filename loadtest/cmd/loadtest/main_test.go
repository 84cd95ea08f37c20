package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// parse must refuse what the PostGIS scenario cannot run, before anything
// starts.
func TestParseSpatial(t *testing.T) {
	const db = "postgres://postgres@127.0.0.1:5432/tileapi_calib?sslmode=disable"
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		err  string // "" for a config
	}{
		{"memory by default", []string{"-scenario", "throughput"}, nil, ""},
		{"postgis", []string{"-scenario", "throughput", "-spatial", "postgis", "-database-url", db}, nil, ""},
		{"postgis from $DATABASE_URL, with pg_tileserv", []string{"-scenario", "throughput", "-spatial", "postgis", "-pg-tileserv", "/usr/local/bin/pg_tileserv"},
			map[string]string{"DATABASE_URL": db}, ""},
		{"an unknown backend", []string{"-scenario", "throughput", "-spatial", "sqlite"}, nil, `-spatial "sqlite"`},
		{"postgis without a database", []string{"-scenario", "throughput", "-spatial", "postgis"}, nil, "needs -database-url"},
		{"postgis with the exactness scenario", []string{"-spatial", "postgis", "-database-url", db}, nil, "-scenario throughput"},
		{"a database elsewhere", []string{"-scenario", "throughput", "-spatial", "postgis", "-database-url", "postgres://db.example.com/x"}, nil, "loopback"},
		{"pg_tileserv on the bundled data", []string{"-scenario", "throughput", "-pg-tileserv", "pg_tileserv"}, nil, "-pg-tileserv needs -spatial postgis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && c.spatial == "postgis" && c.databaseURL != db:
				t.Fatalf("database %q, want %q", c.databaseURL, db)
			}
		})
	}
}

// parse reads -throughput-clients as steps, and -plan as a compiled-in
// key plan of the throughput scenario.
func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		steps []int
		err   string // "" for a config
	}{
		{[]string{"-scenario", "throughput"}, []int{8}, ""},
		{[]string{"-scenario", "throughput", "-throughput-clients", "8,16, 32,64", "-plan", "pro", "-usage-ab"}, []int{8, 16, 32, 64}, ""},
		{[]string{"-scenario", "throughput", "-throughput-clients", "8,0"}, nil, "want counts from 1 to 256"},
		{[]string{"-scenario", "throughput", "-throughput-clients", "8,x"}, nil, "want counts from 1 to 256"},
		{[]string{"-scenario", "throughput", "-plan", "anonymous"}, nil, "want a compiled-in key plan: free, pro"},
		{[]string{"-scenario", "throughput", "-plan", "gold"}, nil, `-plan "gold"`},
		{[]string{"-plan", "pro"}, nil, "-scenario throughput"},
		{[]string{"-usage-ab"}, nil, "-scenario throughput"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := parse(tc.args, func(string) string { return "" }, io.Discard)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && !slices.Equal(c.throughputClients, tc.steps):
				t.Fatalf("steps %v, want %v", c.throughputClients, tc.steps)
			}
		})
	}
}
