-- no-transaction
-- Retention of ended runs: the purge finds the oldest ended runs by this index, however many
-- live runs the store holds. Built without blocking writes (a migration of its own: an index
-- built concurrently cannot share a transaction with anything). It changes no column, so the
-- compatibility record the previous migration set stands. IF NOT EXISTS: a build interrupted
-- midway is finished by hand (`DROP INDEX aiki_runs_ended` and migrate again).
CREATE INDEX CONCURRENTLY IF NOT EXISTS aiki_runs_ended ON aiki_runs (updated_at) WHERE status IN ('completed', 'failed', 'cancelled');
