-- Customers: one budget shared by several keys. A customer has a name and
-- a plan (validated by the caller against the plans, as a key's is), and
-- no secret: its keys are what a client presents. A key belongs to at
-- most one customer (api_keys.customer_id, NULL for none), and each of
-- its requests must fit both its own plan and its customer's. updated_at
-- moves with every change, so every server's key index reads a customer's
-- new plan at its next refresh, as it reads a key's (keys.Index).

-- +goose Up
CREATE TABLE customers (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL,
    plan       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customers_updated_at_idx ON customers (updated_at);
ALTER TABLE api_keys ADD COLUMN customer_id bigint REFERENCES customers (id);
CREATE INDEX api_keys_customer_id_idx ON api_keys (customer_id);

-- +goose Down
DROP INDEX api_keys_customer_id_idx;
ALTER TABLE api_keys DROP COLUMN customer_id;
DROP TABLE customers;
