// Command tileapi serves vector tiles and geofence queries over the bundled
// spatial data, every request metered by a cost-weighted quota, and manages
// its PostGIS database and API keys.
//
//	tileapi [serve] [flags]               serve the API (see tileapi serve -h)
//	tileapi migrate [-database-url URL]   apply the schema migrations
//	tileapi load [-database-url URL] [-places CSV] [-countries GEOJSON] [-counties GEOJSON]
//	                                      load the bundled dataset, or your files in its formats
//	tileapi keys create|list|revoke|set-plan|set-customer   manage API keys
//	tileapi customers create|list|set-plan|rename|usage       manage customers, whose keys share a budget
//	tileapi plans [-plans-file FILE] [-layers-file FILE]  print the plans and what requests cost
//	tileapi layers [-layers-file FILE] [-discover]        print the layers and geofence sets serve would publish
//	tileapi calibrate [-samples N] [-plot FILE]  fit the work model of settling to the loaded database
//	tileapi version                       print the version
//	tileapi healthcheck [-url URL]        exit 0 if GET URL (default http://127.0.0.1:8080/healthz) answers 200
package main

import (
	"context"
	"errors"
	"flag"
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

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func runVersion(_ context.Context, _ []string, _ func(string) string, stdout, _ io.Writer) error {
	_, err := fmt.Fprintln(stdout, "tileapi", version)
	return err
}

// command is one subcommand: args are those after its name.
type command func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// usage is what `tileapi help` prints.
const usage = `tileapi serves vector tiles and geofence queries, every request metered by a
cost-weighted quota, and manages its PostGIS database and API keys.

Usage:
  tileapi [serve] [flags]                serve the API
  tileapi migrate [-database-url URL]    apply the schema migrations (creates PostGIS if it may)
  tileapi load [-database-url URL] [-places CSV] [-countries GEOJSON] [-counties GEOJSON]
                                         load the bundled dataset, or your files in its formats
  tileapi keys create|list|show|revoke|set-plan|set-customer|override|restrict|expire|reroll|usage|reset
                                         manage API keys
  tileapi customers create|list|set-plan|rename|usage
                                         manage customers, whose keys share one budget
  tileapi plans [-plans-file FILE] [-layers-file FILE]
                                         print the plans and what requests cost
  tileapi layers [-layers-file FILE] [-discover] [-database-url URL]
                                         print the layers and geofence sets serve would publish, and what discovery skips
  tileapi export -layer NAME [-zoom 0-8] [-bounds W,S,E,N] -o FILE.pmtiles
                                         render a layer into a PMTiles archive (a layers file's pmtiles: serves it)
  tileapi calibrate [-database-url URL] [-samples N] [-plot FILE]
                                         time requests on the loaded database; fit the work model plans settle with
  tileapi usage [-key ID | -customer ID] [-from T] [-to T] [-by hour|day] [-group route|layer] [-plot FILE]
                                         print (and plot) the usage history kept in PostgreSQL
  tileapi usage export -from T [-to T] [-format cloudevents|csv|stripe] [-o FILE] [-key ID | -customer ID]
                                         write the usage of closed hours for a billing system, with stable event ids
  tileapi healthcheck [-url URL]         exit 0 if GET URL (default http://127.0.0.1:8080/healthz) answers 200
  tileapi version                        print the version
  tileapi help [COMMAND]                 this, or a command's flags (as tileapi COMMAND -h)

Every flag of serve defaults to an environment variable: tileapi serve -h lists them.
`

// commands are the subcommands by name.
func commands() map[string]command {
	return map[string]command{
		"serve":       runServe,
		"migrate":     runMigrate,
		"load":        runLoad,
		"keys":        runKeys,
		"customers":   runCustomers,
		"version":     runVersion,
		"plans":       runPlans,
		"layers":      runLayers,
		"export":      runExport,
		"healthcheck": runHealthcheck,
		"calibrate":   runCalibrate,
		"usage":       runUsage,
	}
}

// run dispatches args[1] to its subcommand.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	commands := commands()
	if len(args) >= 2 && (args[1] == "help" || args[1] == "-h" || args[1] == "-help" || args[1] == "--help") {
		if len(args) >= 3 && args[1] == "help" {
			if cmd, ok := commands[args[2]]; ok {
				if err := cmd(ctx, []string{"-h"}, getenv, stdout, stdout); !errors.Is(err, flag.ErrHelp) {
					return err
				}
				return nil
			}
		}
		_, err := io.WriteString(stdout, usage)
		return err
	}
	if len(args) < 2 || strings.HasPrefix(args[1], "-") {
		// serve is the default: `tileapi` and `tileapi -addr :9000` serve.
		args = append([]string{args[0], "serve"}, args[1:]...)
	}
	cmd, ok := commands[args[1]]
	if !ok {
		return fmt.Errorf("unknown command %q; commands: %s", args[1], names(commands))
	}
	if err := cmd(ctx, args[2:], getenv, stdout, stderr); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil // -h printed the command's usage: no failure
}

func names(commands map[string]command) string {
	var ns []string
	for n := range commands {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return strings.Join(ns, ", ")
}
