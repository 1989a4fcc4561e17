-- Retention of ended runs: the purge finds the oldest ended runs by this index, however many
-- live runs the store holds. Additive: the previous release reads and writes this schema, as
-- do releases from schema 9 on.
UPDATE aiki_compat SET readable_from = 9;

CREATE INDEX aiki_runs_ended ON aiki_runs (updated_at)
    WHERE status IN ('completed', 'failed', 'cancelled');
