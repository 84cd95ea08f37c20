-- A rerolled key's secret before its last reroll: its SHA-256, by which
-- the old secret is still found (and refused once its overlap is over), and
-- until when it still works. NULL for a key never rerolled. See
-- keys.Postgres.Reroll.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN previous_hash bytea UNIQUE CHECK (length(previous_hash) = 32);
ALTER TABLE api_keys ADD COLUMN previous_valid_until timestamptz;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN previous_valid_until;
ALTER TABLE api_keys DROP COLUMN previous_hash;
