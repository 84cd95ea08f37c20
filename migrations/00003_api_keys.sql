-- API keys. The secret itself is never stored: only its SHA-256 (hash),
-- by which a presented key is looked up, and a short visible prefix for
-- humans and logs. See package keys.

-- +goose Up
CREATE TABLE api_keys (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hash       bytea       NOT NULL UNIQUE CHECK (length(hash) = 32),
    prefix     text        NOT NULL,
    name       text        NOT NULL,
    plan       text        NOT NULL, -- validated by the caller against the plans
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz           -- NULL while active
);

-- +goose Down
DROP TABLE api_keys;
