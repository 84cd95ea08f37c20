package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// configDocHeader opens docs/configuration.md, above the table of flags.
const configDocHeader = `# Configuration of tileapi serve

<!-- Generated from the flags of tileapi serve (cmd/tileapi/configdoc.go).
Do not edit: go test ./cmd/tileapi -run TestConfigurationDoc -update
rewrites this file, and the test fails while it differs. -->

Every flag of ` + "`tileapi serve`" + ` defaults to the environment variable
beside it; a flag on the command line wins over the variable. The defaults
below are those with the variable unset. ` + "`tileapi serve -h`" + ` prints
the same list with the defaults the environment gives, secrets shown as
` + "`xxxxx`" + `. Booleans take ` + "`1`, `true`, `yes`, `on`" + ` and
` + "`0`, `false`, `no`, `off`" + `; durations are Go durations (` + "`50ms`, `2s`, `1h`" + `).
How the settings, their secrets and their errors behave, and what the Redis
and PostgreSQL URLs may hold, is in [operations.md](operations.md).

`

// serveFlag is one flag of serve as its usage describes it.
type serveFlag struct {
	name  string // without the dash
	arg   string // what the flag takes (URL, duration, ...); empty for a boolean
	usage string // without the variable and the default
	env   string // the environment variable it defaults to; empty if none
	def   string // its default, with the variable unset
}

var (
	// usageEnv is the variable a usage ends with: "... ($TILEAPI_ADDR)".
	usageEnv = regexp.MustCompile(` \(\$([A-Z][A-Z0-9_]*)\)$`)
	// usageDefault is the default the flag package appends to a usage.
	usageDefault = regexp.MustCompile(` \(default (.+)\)$`)
)

// serveFlags reads the flags of serve from its usage, as serve -h prints
// it with every environment variable unset. It fails on a line it cannot
// read, and on a variable serve does not read, so that a change of either
// shows rather than a wrong table.
func serveFlags() ([]serveFlag, error) {
	read := map[string]bool{} // the variables parseServe reads
	getenv := func(name string) string { read[name] = true; return "" }
	var out bytes.Buffer
	if _, err := parseServe([]string{"-h"}, getenv, &out); !errors.Is(err, flag.ErrHelp) {
		return nil, fmt.Errorf("serve -h: %v, want flag.ErrHelp", err)
	}
	// flag.PrintDefaults writes each flag as "  -name[ arg]" and then its
	// usage on lines that start with "    \t".
	var flags []serveFlag
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "Usage of "):
		case strings.HasPrefix(line, "  -"):
			name, arg, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			flags = append(flags, serveFlag{name: name, arg: arg})
		case strings.HasPrefix(line, "    \t") && len(flags) > 0:
			f := &flags[len(flags)-1]
			f.usage = strings.TrimSpace(f.usage + " " + strings.TrimPrefix(line, "    \t"))
		default:
			return nil, fmt.Errorf("serve -h: cannot read %q", line)
		}
	}
	for i := range flags {
		f := &flags[i]
		if m := usageDefault.FindStringSubmatch(f.usage); m != nil {
			f.usage, f.def = strings.TrimSuffix(f.usage, m[0]), m[1]
			if s, err := strconv.Unquote(f.def); err == nil {
				f.def = s
			}
		} else {
			f.def = zeroDefault(f.arg) // the flag package omits a zero default
		}
		if m := usageEnv.FindStringSubmatch(f.usage); m != nil {
			f.usage, f.env = strings.TrimSuffix(f.usage, m[0]), m[1]
			if !read[f.env] {
				return nil, fmt.Errorf("-%s names $%s, which serve does not read", f.name, f.env)
			}
		}
		if f.usage == "" {
			return nil, fmt.Errorf("-%s has no usage", f.name)
		}
	}
	if len(flags) == 0 {
		return nil, errors.New("serve -h listed no flag")
	}
	return flags, nil
}

// zeroDefault is how the zero value of a flag taking arg prints.
func zeroDefault(arg string) string {
	switch arg {
	case "":
		return "false"
	case "int":
		return "0"
	case "duration":
		return "0s"
	}
	return ""
}

// configurationDoc is docs/configuration.md: every flag of serve with its
// environment variable, its default and its usage.
func configurationDoc() ([]byte, error) {
	flags, err := serveFlags()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(configDocHeader)
	b.WriteString("| flag | variable | default | what it sets |\n| --- | --- | --- | --- |\n")
	for _, f := range flags {
		flagCell := "-" + f.name
		if f.arg != "" {
			flagCell += " " + f.arg
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(flagCell), code(f.env), code(f.def), cell(f.usage))
	}
	return b.Bytes(), nil
}

// code is s as inline code in a table cell, or "none" for nothing.
func code(s string) string {
	if s == "" {
		return "none"
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// cell is s fit for a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
