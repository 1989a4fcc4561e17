-- The queue in claim order: an index of the queued runs alone, by pool and time queued. A
-- claim takes the first queued runs of its pool in `(queued_at, id)` order; over the claim index
-- of migration 0001 it read every queued run of the pool and sorted them in a temporary
-- b-tree, holding the one writer as long as the queue was deep (5,000 queued runs: about
-- 1.5 ms a claim). Over this one it reads its runs in order and stops at its limit. Additive:
-- the previous release reads and writes this schema, and its claims use it too, as do
-- releases from schema 9 on.
UPDATE aiki_compat SET readable_from = 9;

CREATE INDEX aiki_runs_queue ON aiki_runs (pool, queued_at, id) WHERE status = 'queued';
