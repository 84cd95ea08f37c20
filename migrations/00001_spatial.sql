-- Places (points) and fences (polygons) with the indexes the queries use:
-- a geography expression index for ST_DWithin and KNN (<->) on the spheroid,
-- and Web Mercator copies of the geometries with their own GiST indexes for
-- vector tiles, so tiles filter with && on the stored SRID and never
-- transform a row that is not drawn.

-- +goose Up
CREATE TABLE places (
    id           bigint PRIMARY KEY, -- GeoNames geonameid
    name         text   NOT NULL,
    country      text   NOT NULL,
    admin_code   text   NOT NULL,
    feature_code text   NOT NULL,
    population   bigint NOT NULL,
    geom         geometry(Point, 4326) NOT NULL,
    -- Web Mercator is undefined at the poles: places beyond its latitude
    -- limit get an empty point, which no tile envelope overlaps.
    geom_3857    geometry(Point, 3857) GENERATED ALWAYS AS (
        CASE WHEN abs(ST_Y(geom)) < 85.0511287798066
             THEN ST_Transform(geom, 3857)
             ELSE 'SRID=3857;POINT EMPTY'::geometry END) STORED
);
CREATE INDEX places_geog_idx ON places USING gist ((geom::geography));
CREATE INDEX places_geom_3857_idx ON places USING gist (geom_3857);
-- Low-zoom tiles take the most populous places first.
CREATE INDEX places_population_idx ON places (population DESC, id);

CREATE TABLE fences (
    kind      text   NOT NULL CHECK (kind IN ('country', 'county')),
    id        bigint NOT NULL, -- our own id for countries, FIPS for counties
    name      text   NOT NULL,
    code      text,            -- ISO 3166-1 numeric for countries, FIPS for counties
    geom      geometry(MultiPolygon, 4326) NOT NULL,
    -- Clipped just past Web Mercator's latitude limit before projecting.
    geom_3857 geometry(Geometry, 3857) GENERATED ALWAYS AS (
        ST_Transform(ST_ClipByBox2D(geom, ST_MakeEnvelope(-180, -85.06, 180, 85.06, 4326)), 3857)) STORED,
    PRIMARY KEY (kind, id)
);
CREATE INDEX fences_geom_idx ON fences USING gist (geom);
CREATE INDEX fences_geom_3857_idx ON fences USING gist (geom_3857);

-- +goose Down
DROP TABLE fences;
DROP TABLE places;
