-- The places drawn at low zoom: those at or above the population threshold
-- of the highest such zoom (package tiles: LowPlacesZoom, 50,000 at zoom 5),
-- a fifteenth of all places, with indexes of their own. A tile of zooms 0
-- to 5 reads them instead of places, so its query visits only places it may
-- draw, and it can be planned once per connection (PostgreSQL's plan for
-- the whole table depends on the tile's threshold). Stored in Hilbert order
-- (ORDER BY a geometry), so the places of one tile share few pages.
-- tileapi load refreshes it in the transaction that replaces places and
-- the data version; it draws the same tiles as places, so a server's cached
-- tiles stay valid when this migration runs.

-- +goose Up
CREATE MATERIALIZED VIEW places_low AS
SELECT id, name, country, admin_code, feature_code, population, geom_3857
FROM places
WHERE population >= 50000
ORDER BY geom_3857;
CREATE INDEX places_low_geom_3857_idx ON places_low USING gist (geom_3857);
-- Tiles of a quarter of the world or more take the most populous first.
CREATE INDEX places_low_population_idx ON places_low (population DESC, id);
ANALYZE places_low;

-- +goose Down
DROP MATERIALIZED VIEW places_low;
