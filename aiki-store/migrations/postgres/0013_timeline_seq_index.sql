-- no-transaction
-- The change stream's index, built without blocking writes (a migration of its own: an index
-- built concurrently cannot share a transaction with anything). It changes no column, so the
-- compatibility record the previous migration set stands. IF NOT EXISTS: a build interrupted
-- midway is finished by hand (`DROP INDEX aiki_timeline_by_seq` and migrate again).
CREATE INDEX CONCURRENTLY IF NOT EXISTS aiki_timeline_by_seq ON aiki_timeline (seq) WHERE seq IS NOT NULL;
