-- Threshold alerts (internal/alerts): one row per identity, period limit,
-- period and threshold crossed. The row is both the claim (its unique key
-- makes one INSERT win across every server) and the delivery's state
-- (delivered_at stays NULL until the webhook answers 2xx), so an event
-- claimed is never lost when a delivery fails: it is retried.

-- +goose Up
CREATE TABLE alert_events (
    id              text        PRIMARY KEY, -- alerts.EventID of the unique key below
    identity        text        NOT NULL,    -- the quota identity, "key:42"
    limit_name      text        NOT NULL,    -- the period limit, "month"
    period_start    timestamptz NOT NULL,
    threshold       integer     NOT NULL,    -- percent of the limit's max
    body            text        NOT NULL,    -- the JSON posted, the same bytes at every attempt
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    delivered_at    timestamptz,             -- the webhook answered 2xx
    abandoned_at    timestamptz,             -- given up after the retry horizon
    UNIQUE (identity, limit_name, period_start, threshold)
);
-- The events still to deliver, by when they are due.
CREATE INDEX alert_events_due_idx ON alert_events (next_attempt_at)
    WHERE delivered_at IS NULL AND abandoned_at IS NULL;

-- +goose Down
DROP TABLE alert_events;
