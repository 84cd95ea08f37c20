package pglayers

import (
	"context"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/testenv"
)

// TestMain runs the tests, then drops the fixture's schema and role and
// stops the servers testenv started.
func TestMain(m *testing.M) { os.Exit(testenv.Main(run{m})) }

type run struct{ m *testing.M }

func (r run) Run() int {
	code := r.m.Run()
	if fx.drop != nil {
		fx.drop()
	}
	return code
}

// schema and reader are the fixture's schema and the role that may read
// only some of its tables.
const (
	schema = "test_pglayers"
	reader = "test_pglayers_reader"
)

// timeout is the statement timeout of the layers' queries in tests.
const timeout = 10 * time.Second

// fixtureSQL makes the tables of the tests. setseed makes random()
// repeatable within the session.
const fixtureSQL = `
DROP SCHEMA IF EXISTS test_pglayers, test_pglayers_hidden CASCADE;
DROP ROLE IF EXISTS test_pglayers_reader;
CREATE SCHEMA test_pglayers;
SET search_path = test_pglayers, public;
SELECT setseed(0.23);

-- Points in 4326 over the Mercator world, and five near or at the poles
-- (ids 900001-900005) that no tile draws.
CREATE TABLE pts4326 (
    id bigint PRIMARY KEY, name text, pop integer, score double precision, flag boolean,
    tags text[], meta jsonb, amount numeric, "Upper Name" text, geom geometry(Point, 4326));
INSERT INTO pts4326
SELECT i, CASE WHEN i % 10 = 0 THEN NULL ELSE 'p' || i END, (random() * 10000000)::integer, random(), i % 3 = 0,
       ARRAY['a' || i % 5, 'b'], jsonb_build_object('k', i % 7, 's', 'x'), round((random() * 1000)::numeric, 3),
       'U' || i, ST_SetSRID(ST_Point(random() * 360 - 180, random() * 170 - 85), 4326)
FROM generate_series(1, 20000) i;
INSERT INTO pts4326 (id, name, geom) VALUES
    (900001, 'north pole', 'SRID=4326;POINT(0 90)'), (900002, 'south pole', 'SRID=4326;POINT(120 -90)'),
    (900003, 'near north', 'SRID=4326;POINT(10 89.9)'), (900004, 'near south', 'SRID=4326;POINT(-10 -88)'),
    (900005, 'beyond', 'SRID=4326;POINT(45 86)');
CREATE INDEX ON pts4326 USING gist (geom);

-- Lines in 3857: random walks of four vertices, 20 to 60 km a step.
CREATE TABLE lines3857 (gid integer PRIMARY KEY, kind text, geom geometry(LineString, 3857));
INSERT INTO lines3857
SELECT i, 'k' || i % 4, ST_MakeLine(ARRAY[
    ST_Point(x, y, 3857), ST_Point(x + dx, y + dy, 3857), ST_Point(x + 2 * dx, y + dy * 0.5, 3857), ST_Point(x + 2.5 * dx, y - dy, 3857)])
FROM (SELECT i, random() * 38000000 - 19000000 AS x, random() * 38000000 - 19000000 AS y,
             (20000 + random() * 40000) * sign(random() - 0.5) AS dx, (20000 + random() * 40000) * sign(random() - 0.5) AS dy
      FROM generate_series(1, 3000) i) r;
CREATE INDEX ON lines3857 USING gist (geom);

-- Squares 20 to 60 km wide in France, in Lambert-93.
CREATE TABLE polys2154 (id integer PRIMARY KEY, label text, geom geometry(Polygon, 2154));
INSERT INTO polys2154
SELECT i, 'sq' || i, ST_MakeEnvelope(x, y, x + s, y + s, 2154)
FROM (SELECT i, 100000 + random() * 1000000 AS x, 6100000 + random() * 1000000 AS y, 20000 + random() * 40000 AS s
      FROM generate_series(1, 3000) i) r;
CREATE INDEX ON polys2154 USING gist (geom);

-- Squares in UTM zone 33N, as multipolygons.
CREATE TABLE polys32633 (id integer PRIMARY KEY, geom geometry(MultiPolygon, 32633));
INSERT INTO polys32633
SELECT i, ST_Multi(ST_MakeEnvelope(x, y, x + s, y + s, 32633))
FROM (SELECT i, 300000 + random() * 400000 AS x, 4500000 + random() * 3000000 AS y, 20000 + random() * 40000 AS s
      FROM generate_series(1, 3000) i) r;
CREATE INDEX ON polys32633 USING gist (geom);

-- Shapes reaching the poles, in 4326.
CREATE TABLE polar4326 (id integer PRIMARY KEY, geom geometry(Geometry, 4326));
INSERT INTO polar4326 VALUES
    (1, 'SRID=4326;POLYGON((-180 -90, 180 -90, 180 -70, -180 -70, -180 -90))'),
    (2, 'SRID=4326;LINESTRING(10 80, 10 90)'),
    (3, 'SRID=4326;POLYGON((-60 80, 60 80, 60 90, -60 90, -60 80))'),
    (4, 'SRID=4326;MULTIPOINT(5 5, 5 90)'),
    (5, 'SRID=4326;LINESTRING(-170 -89.5, 170 -89.5)');
CREATE INDEX ON polar4326 USING gist (geom);

CREATE VIEW v_big AS SELECT id, name, pop, geom FROM pts4326 WHERE pop >= 5000000;
CREATE MATERIALIZED VIEW mv_small AS SELECT id, geom FROM pts4326 WHERE id <= 100;
CREATE INDEX ON mv_small USING gist (geom);
CREATE MATERIALIZED VIEW mv_noindex AS SELECT id, geom FROM pts4326 WHERE id <= 100;

-- A reserved word for a name, and columns whose names need quotes.
CREATE TABLE "order" (id integer PRIMARY KEY, "Upper Name" text, "select" integer, "two words" text, geom geometry(Point, 3857));
INSERT INTO "order"
SELECT i, 'N' || i, i * 2, 'w ' || i, ST_Point(random() * 4000000 - 2000000, random() * 4000000 - 2000000, 3857)
FROM generate_series(1, 500) i;
CREATE INDEX ON "order" USING gist (geom);

CREATE TABLE noindex (id integer PRIMARY KEY, geom geometry(Point, 4326));
INSERT INTO noindex SELECT i, ST_SetSRID(ST_Point(i, i), 4326) FROM generate_series(1, 10) i;
CREATE TABLE srid0 (id integer PRIMARY KEY, geom geometry(Point));
INSERT INTO srid0 SELECT i, ST_Point(i, i) FROM generate_series(1, 10) i;
CREATE INDEX ON srid0 USING gist (geom);
CREATE TABLE secret (id integer PRIMARY KEY, geom geometry(Point, 4326));
CREATE INDEX ON secret USING gist (geom);
CREATE TABLE twogeoms (id integer PRIMARY KEY, a geometry(Point, 4326), b geometry(Polygon, 4326));
CREATE INDEX ON twogeoms USING gist (a);
CREATE INDEX ON twogeoms USING gist (b);
CREATE TABLE geog (id integer PRIMARY KEY, g geography(Point, 4326));
CREATE INDEX ON geog USING gist (g);
CREATE TABLE curvy (id integer PRIMARY KEY, geom geometry(CurvePolygon, 4326));
CREATE INDEX ON curvy USING gist (geom);
CREATE TABLE badtypes (tid text PRIMARY KEY, n numeric, j jsonb, bin bytea, t text, geom geometry(Point, 4326));
CREATE INDEX ON badtypes USING gist (geom);
CREATE TABLE negids (id integer PRIMARY KEY, geom geometry(Point, 3857));
INSERT INTO negids VALUES (-5, 'SRID=3857;POINT(1000 1000)'), (-1, 'SRID=3857;POINT(2000 2000)'),
                          (0, 'SRID=3857;POINT(3000 3000)'), (3, 'SRID=3857;POINT(4000 4000)');
CREATE INDEX ON negids USING gist (geom);
CREATE TABLE "Dup" (id integer PRIMARY KEY, geom geometry(Point, 4326));
CREATE INDEX ON "Dup" USING gist (geom);
CREATE TABLE dup (id integer PRIMARY KEY, geom geometry(Point, 4326));
CREATE INDEX ON dup USING gist (geom);
CREATE TABLE nopk (code text, geom geometry(Point, 4326));
CREATE INDEX ON nopk USING gist (geom);

-- tileapi's own tables, where its migrations ran.
CREATE TABLE goose_db_version (id integer);
CREATE TABLE places (id integer PRIMARY KEY, geom geometry(Point, 4326));
CREATE INDEX ON places USING gist (geom);

-- Names that would be SQL if they were ever formatted in.
CREATE TABLE "x""; DROP TABLE test_pglayers.pts4326; --" (id integer PRIMARY KEY, "a""b; --" text, geom geometry(Point, 3857));
INSERT INTO "x""; DROP TABLE test_pglayers.pts4326; --" VALUES (1, 'quoted', 'SRID=3857;POINT(5 5)');
CREATE INDEX ON "x""; DROP TABLE test_pglayers.pts4326; --" USING gist (geom);

-- Function layers: a grid of n x n points over the tile (params n, default
-- 4), ids i * n + j, keeping the ids divisible by every (default 1).
CREATE FUNCTION grid(z integer, x integer, y integer, params jsonb) RETURNS bytea LANGUAGE sql STABLE AS $f$
    SELECT ST_AsMVT(f, 'grid', 4096, 'geom', 'id') FROM (
        SELECT i * t.n + j AS id, z AS zoom,
               ST_AsMVTGeom(ST_Point(ST_XMin(t.e) + (i + 0.5) * (ST_XMax(t.e) - ST_XMin(t.e)) / t.n,
                                     ST_YMax(t.e) - (j + 0.5) * (ST_YMax(t.e) - ST_YMin(t.e)) / t.n, 3857), t.e) AS geom
        FROM (SELECT ST_TileEnvelope(z, x, y) AS e, coalesce((params->>'n')::integer, 4) AS n) t,
             generate_series(0, t.n - 1) i, generate_series(0, t.n - 1) j
        WHERE (i * t.n + j) % coalesce((params->>'every')::integer, 1) = 0) f
$f$;
COMMENT ON FUNCTION grid(integer, integer, integer, jsonb) IS 'A grid of points';
CREATE FUNCTION nothing(z integer, x integer, y integer, params jsonb) RETURNS bytea LANGUAGE sql AS $f$ SELECT NULL::bytea $f$;
CREATE FUNCTION bad_args(z integer, x integer, y integer) RETURNS bytea LANGUAGE sql AS $f$ SELECT NULL::bytea $f$;
CREATE FUNCTION bad_return(z integer, x integer, y integer, params jsonb) RETURNS text LANGUAGE sql AS $f$ SELECT '' $f$;
CREATE FUNCTION bad_set(z integer, x integer, y integer, params jsonb) RETURNS SETOF bytea LANGUAGE sql AS $f$ SELECT NULL::bytea $f$;
CREATE FUNCTION private(z integer, x integer, y integer, params jsonb) RETURNS bytea LANGUAGE sql AS $f$ SELECT NULL::bytea $f$;
REVOKE EXECUTE ON FUNCTION private(integer, integer, integer, jsonb) FROM PUBLIC;
COMMENT ON TABLE pts4326 IS 'Random points';

-- A schema the reader may not use.
CREATE SCHEMA test_pglayers_hidden;
CREATE TABLE test_pglayers_hidden.t (id integer PRIMARY KEY, geom geometry(Point, 4326));

-- The reader may read some tables only, and of twogeoms only id and a.
CREATE ROLE test_pglayers_reader LOGIN PASSWORD 'test_pglayers_reader';
GRANT USAGE ON SCHEMA test_pglayers TO test_pglayers_reader;
GRANT SELECT ON pts4326, lines3857, v_big, "order", noindex, srid0 TO test_pglayers_reader;
GRANT SELECT (id, a) ON twogeoms TO test_pglayers_reader;

ANALYZE pts4326, lines3857, polys2154, polys32633, polar4326, "order", negids, mv_small, mv_noindex;
`

// dropSQL undoes fixtureSQL.
const dropSQL = `DROP SCHEMA IF EXISTS test_pglayers, test_pglayers_hidden CASCADE; DROP ROLE IF EXISTS test_pglayers_reader`

// fx is the fixture, made once for the test binary by db.
var fx struct {
	once   sync.Once
	pool   *pgxpool.Pool
	reader *pgxpool.Pool
	drop   func()
	err    error
}

// db returns pools on the fixture's database as its owner and as the
// reader, making the fixture the first time.
func db(tb testing.TB) (owner, readerPool *pgxpool.Pool) {
	tb.Helper()
	base := testenv.DatabaseURL(tb)
	fx.once.Do(func() { fx.err = setup(base) })
	if fx.err != nil {
		tb.Fatal(fx.err)
	}
	return fx.pool, fx.reader
}

func setup(base string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	fx.drop = func() {
		for _, p := range []*pgxpool.Pool{fx.pool, fx.reader} {
			if p != nil {
				p.Close()
			}
		}
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, dropSQL)
	}
	if _, err := conn.Exec(ctx, fixtureSQL); err != nil {
		return err
	}
	if fx.pool, err = pgxpool.New(ctx, base); err != nil {
		return err
	}
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	// A password too: the containers job's PostGIS asks for one, the
	// local one trusts local connections.
	u.User = url.UserPassword(reader, reader)
	fx.reader, err = pgxpool.New(ctx, u.String())
	return err
}
