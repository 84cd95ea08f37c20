package pgsets

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/testenv"
)

// TestMain drops the schema the tests made, then stops the servers testenv
// started.
func TestMain(m *testing.M) { os.Exit(testenv.Main(runFunc(func() int { return dropAfter(m.Run()) }))) }

type runFunc func() int

func (f runFunc) Run() int { return f() }

// schema is the tests' own schema, made once per test binary.
const schema = "test_pgsets"

// setupSQL makes the tables of the tests in schema test_pgsets, with data
// drawn from a seeded random(): points in WGS84 (stores, and "order", a
// reserved word), polygons in Lambert-93 (parcels: French-like data, some
// near the north pole, half of them wound clockwise, some with a hole),
// lines in Web Mercator (roads), polygons in UTM 33N (zones), a view of
// the parcels in WGS84, and tables each wrong in one way for Open.
const setupSQL = `
DROP SCHEMA IF EXISTS test_pgsets CASCADE;
CREATE SCHEMA test_pgsets;
SELECT setseed(0.2026);

CREATE FUNCTION test_pgsets.wrap(lng float8) RETURNS float8 LANGUAGE sql IMMUTABLE AS
  'SELECT CASE WHEN lng > 180 THEN lng - 360 WHEN lng < -180 THEN lng + 360 ELSE lng END';

CREATE TABLE test_pgsets.stores (
  id bigint PRIMARY KEY, name text, rank integer, score double precision, open boolean,
  opened date, note text, tags text[], geom geometry(Point, 4326));
INSERT INTO test_pgsets.stores
SELECT i, 'store ' || i, i % 7, round((random() * 100)::numeric, 3)::float8, i % 3 = 0,
       date '2020-01-01' + i, CASE WHEN i % 5 <> 0 THEN 'note ' || i END, ARRAY['a', 'b'],
       ST_SetSRID(CASE
         WHEN i > 2990 THEN ST_MakePoint(2.35, 48.85) -- the same place: ties broken by id
         WHEN i % 6 = 0 THEN ST_MakePoint(2.35 + (random() - 0.5), 48.85 + (random() - 0.5) * 0.6)
         WHEN i % 6 = 1 THEN ST_MakePoint(test_pgsets.wrap(180 + (random() - 0.5) * 2), -16.5 + (random() - 0.5) * 2)
         WHEN i % 6 = 2 THEN ST_MakePoint(random() * 360 - 180, 90 - random() * 1.5)
         WHEN i % 6 = 3 THEN ST_MakePoint(random() * 360 - 180, -90 + random() * 1.5)
         ELSE ST_MakePoint(random() * 360 - 180, degrees(asin(2 * random() - 1)))
       END, 4326)
FROM generate_series(1, 3000) AS i;
CREATE INDEX stores_geom_idx ON test_pgsets.stores USING gist (geom);

CREATE TABLE test_pgsets.parcels (gid integer PRIMARY KEY, owner text, area_m2 numeric,
  geom geometry(MultiPolygon, 2154));
INSERT INTO test_pgsets.parcels (gid, owner, geom)
SELECT i, 'owner ' || (i % 40), ST_Multi(CASE WHEN i % 4 = 0 THEN ST_Difference(shape, ST_Buffer(c, size / 3, 'quad_segs=3')) ELSE shape END)
FROM (
  SELECT i, c, size, ST_Rotate(ST_Buffer(c, size, 'quad_segs=' || (1 + i % 4)), random() * pi(), c) AS shape
  FROM (
    SELECT i, 30 + random() * 1500 AS size, CASE
      WHEN i % 5 = 0 THEN ST_SetSRID(ST_MakePoint(652000 + (random() - 0.5) * 30000, 6862000 + (random() - 0.5) * 30000), 2154)
      WHEN i % 5 = 1 THEN ST_SetSRID(ST_MakePoint(842000 + (random() - 0.5) * 20000, 6519000 + (random() - 0.5) * 20000), 2154)
      WHEN i % 5 = 2 THEN ST_Transform(ST_SetSRID(ST_MakePoint(random() * 360 - 180, 88.6 + random() * 1.3), 4326), 2154)
      ELSE ST_SetSRID(ST_MakePoint(100000 + random() * 1100000, 6050000 + random() * 1050000), 2154)
    END AS c
    FROM generate_series(1, 2000) AS i
  ) AS centres
) AS shapes;
UPDATE test_pgsets.parcels SET geom = CASE WHEN gid % 2 = 0 THEN ST_ForcePolygonCW(geom) ELSE ST_ForcePolygonCCW(geom) END,
  area_m2 = round(ST_Area(geom)::numeric, 2);
CREATE INDEX parcels_geom_idx ON test_pgsets.parcels USING gist (geom);

CREATE VIEW test_pgsets.parcels_wgs84 AS
SELECT gid, owner, ST_Transform(geom, 4326)::geometry(MultiPolygon, 4326) AS geom FROM test_pgsets.parcels;

CREATE TABLE test_pgsets.roads (id integer PRIMARY KEY, name text, geom geometry(LineString, 3857));
INSERT INTO test_pgsets.roads
SELECT i, 'road ' || i, ST_SetSRID(ST_MakeLine(array_agg(ST_MakePoint(x0 + k * dx + (random() - 0.5) * 400,
                                                                  y0 + k * dy + (random() - 0.5) * 400) ORDER BY k)), 3857)
FROM (
  SELECT i, (random() - 0.5) * 2000 AS dx, (random() - 0.5) * 2000 AS dy, 1 + (random() * 7)::int AS n, CASE
      WHEN i % 5 = 0 THEN 261600 + (random() - 0.5) * 40000
      WHEN i % 5 = 1 THEN 20020000 + random() * 12000
      WHEN i % 5 = 2 THEN -20020000 - random() * 12000
      ELSE (random() - 0.5) * 40000000
    END AS x0, CASE
      WHEN i % 5 = 0 THEN 6250500 + (random() - 0.5) * 40000
      WHEN i % 5 IN (1, 2) THEN -1800000 + (random() - 0.5) * 300000
      WHEN i % 5 = 3 THEN 18500000 + random() * 600000 -- about 83 degrees north
      ELSE (random() - 0.5) * 30000000
    END AS y0
  FROM generate_series(1, 1500) AS i
) AS starts, generate_series(0, 8) AS k
WHERE k <= n
GROUP BY i, x0, y0;
CREATE INDEX roads_geom_idx ON test_pgsets.roads USING gist (geom);

CREATE TABLE test_pgsets.zones (id integer PRIMARY KEY, geom geometry(Polygon, 32633));
INSERT INTO test_pgsets.zones
SELECT i, ST_Buffer(ST_SetSRID(ST_MakePoint(500000 + (random() - 0.5) * 400000, 5000000 + (random() - 0.5) * 400000), 32633), 5000 + random() * 20000)
FROM generate_series(1, 200) AS i;
CREATE INDEX zones_geom_idx ON test_pgsets.zones USING gist (geom);

CREATE TABLE test_pgsets."order" ("select" integer PRIMARY KEY, "from" text, distance float8, "Mixed Case" text,
  geom geometry(Point, 4326));
INSERT INTO test_pgsets."order"
SELECT i, 'from ' || i, i * 1.5, 'case ' || i, ST_SetSRID(ST_MakePoint(13.4 + (random() - 0.5), 52.5 + (random() - 0.5)), 4326)
FROM generate_series(1, 300) AS i;
CREATE INDEX order_geom_idx ON test_pgsets."order" USING gist (geom);

CREATE TABLE test_pgsets.plain (id integer PRIMARY KEY, name text);
CREATE TABLE test_pgsets.two_geoms (id integer PRIMARY KEY, a geometry(Point, 4326), b geometry(Point, 4326));
CREATE TABLE test_pgsets.nosrid (id integer PRIMARY KEY, geom geometry);
CREATE TABLE test_pgsets.unknown_srid (id integer PRIMARY KEY, geom geometry(Point, 990001));
CREATE TABLE test_pgsets.curvy (id integer PRIMARY KEY, geom geometry(CircularString, 4326));
CREATE TABLE test_pgsets.geog (id integer PRIMARY KEY, geom geography(Point, 4326));
CREATE TABLE test_pgsets.text_key (code text PRIMARY KEY, geom geometry(Point, 4326));
INSERT INTO test_pgsets.text_key VALUES ('a', 'SRID=4326;POINT(1 1)');
CREATE TABLE test_pgsets.generic (id integer PRIMARY KEY, geom geometry(Geometry, 4326));
INSERT INTO test_pgsets.generic VALUES
  (1, 'SRID=4326;POINT(1 1)'), (2, 'SRID=4326;LINESTRING(1 1, 1.001 1.001)'),
  (3, 'SRID=4326;POLYGON((0.999 0.999, 1.001 0.999, 1.001 1.001, 0.999 1.001, 0.999 0.999))'),
  (4, 'SRID=4326;GEOMETRYCOLLECTION(POINT(1.0005 1), LINESTRING(1 1.0005, 1.0001 1.0005))'),
  (5, 'SRID=4326;MULTIPOINT(1.0002 1.0002, 5 5)');
CREATE TABLE test_pgsets.heights (id integer PRIMARY KEY, geom geometry(PointZ, 4326));
INSERT INTO test_pgsets.heights VALUES (1, 'SRID=4326;POINT Z (1.0002 1.0002 30)');
CREATE SEQUENCE test_pgsets.seq;

ANALYZE test_pgsets.stores, test_pgsets.parcels, test_pgsets.roads, test_pgsets.zones, test_pgsets."order";
`

var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// testPool returns a pool on the test database with the tables of
// setupSQL made, once per test binary.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := testenv.DatabaseURL(t)
	shared.once.Do(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			shared.err = err
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, setupSQL); err != nil {
			shared.err = err
			return
		}
		shared.pool, shared.err = pgxpool.New(ctx, u)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.pool
}

// dropAfter drops the tests' schema, if they made it, and returns code.
func dropAfter(code int) int {
	if shared.pool != nil {
		if _, err := shared.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			os.Stderr.WriteString("pgsets: dropping the test schema: " + err.Error() + "\n")
		}
		shared.pool.Close()
	}
	return code
}

// openSet opens the set of cfg on the test tables, failing t if it cannot.
func openSet(t testing.TB, cfg layers.Set) geofence.Set {
	t.Helper()
	s, err := Open(context.Background(), testPool(t), 10*time.Second, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
