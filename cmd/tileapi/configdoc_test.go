package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the flags of serve")

// docs/configuration.md is what the flags of serve render: a flag added,
// removed or reworded fails this test until the file is rewritten with
// go test ./cmd/tileapi -run TestConfigurationDoc -update.
func TestConfigurationDoc(t *testing.T) {
	const path = "../../docs/configuration.md"
	want, err := configurationDoc()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gotLines), len(wantLines)) {
			var g, w string
			if i < len(gotLines) {
				g = gotLines[i]
			}
			if i < len(wantLines) {
				w = wantLines[i]
			}
			if g != w {
				t.Fatalf("%s differs from the flags of serve at line %d:\n have %q\n want %q\nrun go test ./cmd/tileapi -run TestConfigurationDoc -update", path, i+1, g, w)
			}
		}
	}
}

// Every flag serve defines is in the table, with its variable and its
// default as parseServe sets them.
func TestServeFlagsRead(t *testing.T) {
	flags, err := serveFlags()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]serveFlag{}
	for _, f := range flags {
		byName[f.name] = f
	}
	for _, tc := range []serveFlag{
		{name: "addr", arg: "string", env: "TILEAPI_ADDR", def: ":8080"},
		{name: "redis-url", arg: "URL", env: "REDIS_URL", def: ""},
		{name: "shadow", arg: "", env: "TILEAPI_SHADOW", def: "false"},
		{name: "anonymous", arg: "", env: "TILEAPI_ANONYMOUS", def: "true"},
		{name: "quota-timeout", arg: "duration", env: "TILEAPI_QUOTA_TIMEOUT", def: "50ms"},
		{name: "quota-max-wait", arg: "duration", env: "TILEAPI_QUOTA_MAX_WAIT", def: "0s"},
		{name: "max-conns", arg: "int", env: "TILEAPI_MAX_CONNS", def: "0"},
		{name: "db-max-conns", arg: "int", env: "", def: "10"},
		{name: "unknown-keys", arg: "int", env: "TILEAPI_UNKNOWN_KEYS", def: "30"},
	} {
		f, ok := byName[tc.name]
		if !ok {
			t.Errorf("-%s: not in the table", tc.name)
			continue
		}
		if f.arg != tc.arg || f.env != tc.env || f.def != tc.def || f.usage == "" || strings.Contains(f.usage, "($") {
			t.Errorf("-%s: read %+v, want arg %q env %q default %q and a usage without its variable", tc.name, f, tc.arg, tc.env, tc.def)
		}
	}
}
