#!/usr/bin/env bash
# Makes the FlatGeobuf fixtures from the GeoJSON beside them with GDAL's
# ogr2ogr (Debian: apt-get install gdal-bin), a writer independent of the
# reader under test. The outputs are committed: tests and CI need no GDAL.
set -euo pipefail
cd "$(dirname "$0")"
fgb() { ogr2ogr -f FlatGeobuf "$@"; }

# Spatial index (GDAL's default), so features come in Hilbert order.
fgb points.fgb points.geojson
fgb polygons.fgb polygons.geojson
fgb multipolygons.fgb multipolygons.geojson
fgb mixed.fgb mixed.geojson
# No spatial index.
fgb -lco SPATIAL_INDEX=NO lines.fgb lines.geojson

# Real data: 5 countries from the bundled Natural Earth file (Italy has
# San Marino and the Vatican as holes; Fiji crosses the antimeridian).
rm -f countries.geojson
ogr2ogr -f GeoJSON countries.geojson /vsigzip/../../dataset/data/countries-50m.geojson.gz \
  -where "name IN ('Italy', 'Vatican', 'San Marino', 'Fiji', 'Lesotho')"
fgb countries.fgb countries.geojson

# To be refused: Web Mercator, no CRS (a CSV has none), a CRS with no code.
fgb -t_srs EPSG:3857 points-3857.fgb points.geojson
printf 'name,lon,lat\nA,1,2\nB,3,4\n' >nocrs.csv
fgb -oo X_POSSIBLE_NAMES=lon -oo Y_POSSIBLE_NAMES=lat -oo KEEP_GEOM_COLUMNS=NO points-nocrs.fgb nocrs.csv
rm nocrs.csv
fgb -a_srs '+proj=longlat +ellps=intl +no_defs' lines-nocode.fgb lines.geojson
