-- The runtime configuration kept in the store (the daemons' timings and limits), so that every
-- process on one store agrees on them. Additive: releases from schema 9 on read and write this
-- schema; a release that knows no configuration uses the defaults, as every one did before.
UPDATE aiki_compat SET readable_from = 9;

-- One row per key set by an operator (`aiki config set`); a key without a row has its default.
-- Keys are the product's names (`daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs`);
-- a release ignores the keys it does not know.
CREATE TABLE aiki_config (
    key        TEXT    NOT NULL PRIMARY KEY,
    value      INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
