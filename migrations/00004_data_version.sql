-- The version of the loaded data, replaced by every load: servers key
-- their tile cache by it, so no tile of older data is served as current.

-- +goose Up
CREATE TABLE data_version (
    id        int PRIMARY KEY DEFAULT 1 CHECK (id = 1), -- one row
    version   text        NOT NULL,
    loaded_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE data_version;
