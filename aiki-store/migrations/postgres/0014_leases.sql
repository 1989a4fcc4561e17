-- The daemons' leader lease. Additive: releases from schema 10 on (the last one without the
-- compatibility record, and the operations migration's) read and write this schema; a release
-- that knows no lease sweeps unfenced, as every worker did before.
UPDATE aiki_compat SET readable_from = 10;

-- One row per store-wide duty held by one process at a time (the daemons' sweeps): who holds
-- it, until when (by the store's claim clock), and a fencing token that grows whenever the
-- duty changes hands. Every sweep checks its holder's token in its own transaction (holding
-- the row shared until it commits, so a takeover waits for a sweep under way), so a holder
-- that stalled past its expiry (a frozen process) sweeps nothing once another took over.
CREATE TABLE aiki_leases (
    name       TEXT   NOT NULL PRIMARY KEY,
    holder     TEXT   NOT NULL,
    token      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
