#!/bin/sh
# Refreshes the PostGIS throughput figures of docs/benchmarks.md: runs the
# load tool's throughput scenario with its spatial work on PostGIS, tile
# misses of the bundled places layer and of a table layer over a view of
# the same places (and pg_tileserv on the same view and tile misses, where
# PG_TILESERV names its binary),
# then writes docs/loadtest-postgis.md (the table), docs/loadtest-postgis.png
# (req/s) and docs/loadtest-postgis-latency.png, and puts the table in
# docs/benchmarks.md between its loadtest-postgis markers. Run from the repository root:
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/tileapi_calib?sslmode=disable \
#   PG_TILESERV=$HOME/go/bin/pg_tileserv loadtest/postgis.sh
#
# DATABASE_URL must be loaded (tileapi migrate && tileapi load); the run
# renews its data version and creates the view loadtest_places, which the
# table layer and pg_tileserv serve. Extra
# arguments go to the load tool (-phase, -throughput-clients, ...).
set -eu
: "${DATABASE_URL:?set DATABASE_URL to PostGIS on loopback, after tileapi migrate && tileapi load}"
out=loadtest/out/postgis
set -- -scenario throughput -spatial postgis -throughput-clients 16 -phase 5s -out "$out" "$@"
if [ -n "${PG_TILESERV:-}" ]; then
	set -- "$@" -pg-tileserv "$PG_TILESERV"
fi
go run ./loadtest/cmd/loadtest "$@"
cp "$out/throughput.md" docs/loadtest-postgis.md
cp "$out/rps.png" docs/loadtest-postgis.png
cp "$out/latency.png" docs/loadtest-postgis-latency.png
# Replace the lines between the markers with the new table.
awk -v table=docs/loadtest-postgis.md '
	/<!-- loadtest-postgis:end -->/ { skip = 0 }
	!skip { print }
	/<!-- loadtest-postgis:begin -->/ { while ((getline line < table) > 0) print line; skip = 1 }
' docs/benchmarks.md > docs/benchmarks.md.new
mv docs/benchmarks.md.new docs/benchmarks.md
echo "docs/loadtest-postgis.md, docs/loadtest-postgis.png, docs/loadtest-postgis-latency.png and docs/benchmarks.md updated"
