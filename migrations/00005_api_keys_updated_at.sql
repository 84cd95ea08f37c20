-- When each key last changed, so every server's in-process key index reads
-- only what changed since its last refresh (keys.Index).

-- +goose Up
ALTER TABLE api_keys ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX api_keys_updated_at_idx ON api_keys (updated_at);

-- +goose Down
DROP INDEX api_keys_updated_at_idx;
ALTER TABLE api_keys DROP COLUMN updated_at;
