-- no-transaction
-- The change stream's batches after the first are found by their transactions' ids, not by
-- walking the numbers of every change before them (a reader starting from now on a store with
-- a million changes read them all to find none). Built without blocking writes (a migration of
-- its own: an index built concurrently cannot share a transaction with anything). It changes
-- no column, so the compatibility record the previous migration set stands. IF NOT EXISTS: a
-- build interrupted midway is finished by hand (`DROP INDEX aiki_timeline_by_xid` and migrate
-- again).
CREATE INDEX CONCURRENTLY IF NOT EXISTS aiki_timeline_by_xid ON aiki_timeline (xid) WHERE xid IS NOT NULL;
