-- The runtime configuration kept in the store (the daemons' timings and limits), so that every
-- process and server on one store agrees on them. Additive: releases from schema 10 on read
-- and write this schema; a release that knows no configuration uses the defaults, as every one
-- did before.
UPDATE aiki_compat SET readable_from = 10;

-- One row per key set by an operator (`aiki config set`); a key without a row has its default.
-- Keys are the product's names (`daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs`);
-- a release ignores the keys it does not know.
CREATE TABLE aiki_config (
    key        TEXT   NOT NULL PRIMARY KEY,
    value      BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
