-- Overage in the usage history: the units charged past the max of a soft
-- cap (a plan's "overage": a day or month limit that goes on past its max
-- as metered overage instead of refusing), as settled: a refund or
-- settlement takes the units it gives back off the overage first. They
-- are also in units_charged (units_given_back): the units past the cap are
-- a part of the units used, the part an invoice prices as overage.

-- +goose Up
ALTER TABLE usage_hourly ADD COLUMN units_overage bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN units_overage bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE usage_daily DROP COLUMN units_overage;
ALTER TABLE usage_hourly DROP COLUMN units_overage;
