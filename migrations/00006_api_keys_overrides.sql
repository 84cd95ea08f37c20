-- Per-key overrides of a key's plan: limits that replace or add to the
-- plan's, and its in-flight limit, as JSON (plans.Overrides); NULL for none.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN overrides jsonb;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN overrides;
