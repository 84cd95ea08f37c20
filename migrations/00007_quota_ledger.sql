-- The usage ledger: what each quota identity used in each calendar period
-- (a day, a month) of each period limit, as every server's charges, refunds
-- and settlements add up, written behind the requests in batches. A
-- counter Redis lost (a restart without persistence, a flush, a failover)
-- is restored from it before it is charged again (internal/ledger).

-- +goose Up
CREATE TABLE quota_ledger (
    identity     text        NOT NULL, -- the quota identity, "key:42"
    limit_name   text        NOT NULL, -- the period limit's name, "month"
    period_start timestamptz NOT NULL, -- the start of the period counted
    units        bigint      NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (identity, limit_name, period_start)
);

-- The batches applied, by the id the writing server gave each before its
-- first attempt: a batch retried after a commit whose answer was lost is
-- applied once. Pruned after a week, far past any retry.
CREATE TABLE quota_ledger_batches (
    id         uuid        PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX quota_ledger_batches_applied_at_idx ON quota_ledger_batches (applied_at);

-- +goose Down
DROP TABLE quota_ledger_batches;
DROP TABLE quota_ledger;
