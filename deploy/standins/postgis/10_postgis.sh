#!/bin/sh
# As in the upstream postgis image: the extensions in template_postgis and
# in POSTGRES_DB (the upstream image also adds fuzzystrmatch and the tiger
# geocoder, which tileapi does not use).
set -e
psql -v ON_ERROR_STOP=1 --dbname postgres -c 'CREATE DATABASE template_postgis IS_TEMPLATE true'
for db in template_postgis "$POSTGRES_DB"; do
  psql -v ON_ERROR_STOP=1 --dbname "$db" \
    -c 'CREATE EXTENSION IF NOT EXISTS postgis' \
    -c 'CREATE EXTENSION IF NOT EXISTS postgis_topology'
done
