-- A copy of each fence simplified to the tolerance of a zoom-4 tile
-- (2445.98490512564 m: 4 tile units of 4096 over the world's width / 2^4),
-- which tiles at zooms 0 to 4 draw from instead of the full geometry, so a
-- world tile does not clip and simplify every vertex of every coastline.
-- Package tiles holds the same zoom and tolerance (lowZoom, tolerance).

-- +goose Up
ALTER TABLE fences ADD COLUMN geom_3857_low geometry(Geometry, 3857) GENERATED ALWAYS AS (
    ST_Simplify(
        ST_Transform(ST_ClipByBox2D(geom, ST_MakeEnvelope(-180, -85.06, 180, 85.06, 4326)), 3857),
        2445.98490512564)) STORED;

-- +goose Down
ALTER TABLE fences DROP COLUMN geom_3857_low;
