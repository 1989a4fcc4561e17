-- The daemons' leader lease. Additive: releases from schema 9 on (the last one without the
-- compatibility record, and the operations migration's) read and write this schema; a release
-- that knows no lease sweeps unfenced, as every worker did before.
UPDATE aiki_compat SET readable_from = 9;

-- One row per store-wide duty held by one process at a time (the daemons' sweeps): who holds
-- it, until when (by the store's claim clock), and a fencing token that grows whenever the
-- duty changes hands. Every sweep checks its holder's token in its own transaction, so a
-- holder that stalled past its expiry (a frozen process) sweeps nothing once another took over.
CREATE TABLE aiki_leases (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    token      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
