-- Where and for what a key works, and until when: its restrictions as
-- JSON (allowed origins, client networks, routes, layers and geofence
-- sets; see package access), NULL for none; and the time it stops working,
-- NULL for never.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN restrictions jsonb;
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN expires_at;
ALTER TABLE api_keys DROP COLUMN restrictions;
