-- Usage history: what each quota identity used, per UTC hour, route and
-- layer (or geofence set): the requests answered, the units charged and
-- given back (refunds, settlements), the units served unmetered, and the
-- requests refused (429, 422). Written by the usage ledger's batched flush
-- (internal/ledger), in the transaction of the batch id it is applied once
-- by. Units as settled for an hour = units_charged - units_given_back.
-- Hours older than the retention are rolled up into usage_daily and
-- deleted from usage_hourly (internal/usage).

-- +goose Up
CREATE TABLE usage_hourly (
    identity         text        NOT NULL, -- the quota identity charged: "key:42", "{customer:7}key:42", "ip:203.0.113.0/24"
    key_id           bigint,               -- the API key, NULL for a request without one
    customer_id      bigint,               -- the key's customer, NULL for none
    hour             timestamptz NOT NULL, -- the start of the UTC hour
    route            text        NOT NULL, -- the route's name as access.go/metrics name it: "tiles", "within", "contains", "sets", "tokens", ...
    layer            text        NOT NULL DEFAULT '', -- the tile layer or geofence set, '' for none
    requests         bigint      NOT NULL DEFAULT 0,  -- metered requests answered (any status)
    units_charged    bigint      NOT NULL DEFAULT 0,  -- units charged up front (admitted charges, and pending charges once made)
    units_given_back bigint      NOT NULL DEFAULT 0,  -- units returned by refunds and settlements
    units_unmetered  bigint      NOT NULL DEFAULT 0,  -- units of requests served unmetered (fail-open), whether or not charged later
    refused_429      bigint      NOT NULL DEFAULT 0,
    refused_422      bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (identity, hour, route, layer)
);
CREATE INDEX usage_hourly_key_hour_idx ON usage_hourly (key_id, hour);
CREATE INDEX usage_hourly_customer_hour_idx ON usage_hourly (customer_id, hour);

-- The hours past the retention, summed per UTC day.
CREATE TABLE usage_daily (
    identity         text    NOT NULL,
    key_id           bigint,
    customer_id      bigint,
    day              date    NOT NULL, -- the UTC day
    route            text    NOT NULL,
    layer            text    NOT NULL DEFAULT '',
    requests         bigint  NOT NULL DEFAULT 0,
    units_charged    bigint  NOT NULL DEFAULT 0,
    units_given_back bigint  NOT NULL DEFAULT 0,
    units_unmetered  bigint  NOT NULL DEFAULT 0,
    refused_429      bigint  NOT NULL DEFAULT 0,
    refused_422      bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (identity, day, route, layer)
);
CREATE INDEX usage_daily_key_day_idx ON usage_daily (key_id, day);
CREATE INDEX usage_daily_customer_day_idx ON usage_daily (customer_id, day);

-- +goose Down
DROP TABLE usage_daily;
DROP TABLE usage_hourly;
