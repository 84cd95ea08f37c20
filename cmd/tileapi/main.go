// Command tileapi serves vector tiles and geofence queries over the bundled
// spatial data, and manages its PostGIS database.
//
//	tileapi migrate [-database-url URL]   apply the schema migrations
//	tileapi load [-database-url URL] [-places CSV] [-countries GEOJSON] [-counties GEOJSON]
//	                                      load the bundled dataset, or your files in its formats
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tileapi:", err)
		os.Exit(1)
	}
}

// command is one subcommand: args are those after its name.
type command func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// run dispatches args[1] to its subcommand.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	commands := map[string]command{
		"migrate": runMigrate,
		"load":    runLoad,
	}
	if len(args) < 2 {
		return fmt.Errorf("usage: tileapi <command> [flags]; commands: %s", names(commands))
	}
	cmd, ok := commands[args[1]]
	if !ok {
		return fmt.Errorf("unknown command %q; commands: %s", args[1], names(commands))
	}
	return cmd(ctx, args[2:], getenv, stdout, stderr)
}

func names(commands map[string]command) string {
	var ns []string
	for n := range commands {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return strings.Join(ns, ", ")
}
