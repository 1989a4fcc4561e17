-- Operations: runs woken by what their wait set names, timelines that store facts and who
-- acted, pauses that never fence a task in flight, claim recovery that survives restarts, and
-- a compatibility record for rolling deploys. Additive: the release before this one (schema
-- 10) reads and writes this schema; the columns it does not know are left NULL by its writes.
-- Every column added is nullable without a default, so no table is rewritten. Releases before
-- it hold no compatibility record, so a restarting one refuses any newer schema: upgrading from
-- them is stop-and-migrate (pods already running keep working), and rolling deploys start with
-- this release.

-- The compatibility record: the oldest schema version whose release still reads and writes
-- this schema correctly. Every migration from this one on sets it (an additive migration keeps
-- it, one the previous release would misread raises it to its own version).
CREATE TABLE aiki_compat (
    id            INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    readable_from BIGINT  NOT NULL
);
INSERT INTO aiki_compat (id, readable_from) VALUES (1, 10);

-- Who or what made a run's latest change, for the timeline trigger: a statement that knows
-- (an operator's action, an event's arrival, a child's end) sets these with `change_rev`, the
-- revision it writes; a note whose revision is not the row's is stale (written by a statement
-- of a release that does not know these columns) and ignored.
ALTER TABLE aiki_runs ADD COLUMN change_actor TEXT;
ALTER TABLE aiki_runs ADD COLUMN change_cause TEXT;
ALTER TABLE aiki_runs ADD COLUMN change_rev BIGINT;

-- A pause requested while the run is `running`: its executor starts no new task, lets the ones
-- in flight record their results, and moves the run to `paused` itself.
ALTER TABLE aiki_runs ADD COLUMN pause_requested_at BIGINT;
ALTER TABLE aiki_runs ADD COLUMN pause_requested_by TEXT;

-- Claim recovery in two phases: a sweep marks a claim found stale (`stale_since`, by the claim
-- clock), and a later sweep releases it only if it was not refreshed since the mark, one
-- refresh interval plus a margin later.
ALTER TABLE aiki_runs ADD COLUMN stale_since BIGINT;

-- The timeline stores facts, worded in Rust when read: what caused a wake-up (`event`,
-- `child`), whether the change scheduled a workflow retry, the run's error kind. `reason`
-- holds the words only in rows written before this migration (it is '' from now on).
ALTER TABLE aiki_timeline ADD COLUMN cause TEXT;
ALTER TABLE aiki_timeline ADD COLUMN retry BOOLEAN;
ALTER TABLE aiki_timeline ADD COLUMN error_kind TEXT;

-- Who sent an event.
ALTER TABLE aiki_events ADD COLUMN sent_by TEXT;

-- What a task call was given (JSON, capped in size by the runtime).
ALTER TABLE aiki_entries ADD COLUMN input TEXT;

-- Workers say when they stop, which builds they run (catalog fingerprints per version) and
-- the claim timing they use.
ALTER TABLE aiki_workers ADD COLUMN stopped_at BIGINT;
ALTER TABLE aiki_workers ADD COLUMN fingerprints TEXT; -- JSON: {"workflow@version": fingerprint}
ALTER TABLE aiki_workers ADD COLUMN claim_refresh_ms BIGINT;
ALTER TABLE aiki_workers ADD COLUMN claim_idle_timeout_ms BIGINT;

-- Every build's catalog entry of a version, by fingerprint: a rolling deploy runs two builds of
-- one version at once, and an older pod restarting must not hide the newer build's entry.
-- (`aiki_catalog` keeps the latest entry per version for releases that read only it.)
CREATE TABLE aiki_catalog_builds (
    workflow     TEXT    NOT NULL,
    version      TEXT    NOT NULL,
    fingerprint  TEXT    NOT NULL,
    entry        TEXT    NOT NULL, -- JSON: aiki_store::CatalogEntry
    published_by TEXT    NOT NULL,
    published_at BIGINT  NOT NULL,
    PRIMARY KEY (workflow, version, fingerprint)
);
INSERT INTO aiki_catalog_builds SELECT workflow, version, fingerprint, entry, published_by,
    published_at FROM aiki_catalog;

CREATE OR REPLACE FUNCTION aiki_timeline_start() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aiki_timeline
        (run_id, revision, from_status, to_status, reason, actor, at, cause, retry, error_kind)
    VALUES (NEW.id, NEW.revision, NULL, NEW.status, '',
        CASE WHEN NEW.change_rev = NEW.revision THEN NEW.change_actor END, NEW.created_at,
        CASE WHEN NEW.change_rev = NEW.revision THEN NEW.change_cause END, false, NULL)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_timeline_start() SET search_path FROM CURRENT;

CREATE OR REPLACE FUNCTION aiki_timeline_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aiki_timeline
        (run_id, revision, from_status, to_status, reason, actor, at, cause, retry, error_kind)
    VALUES (NEW.id, NEW.revision, OLD.status, NEW.status, '',
        CASE WHEN NEW.change_rev = NEW.revision AND NEW.change_actor IS NOT NULL
                 THEN NEW.change_actor
             WHEN OLD.status = 'running' THEN OLD.owner
             WHEN NEW.status = 'running' THEN NEW.owner END,
        NEW.updated_at,
        CASE WHEN NEW.change_rev = NEW.revision THEN NEW.change_cause END,
        NEW.attempts > OLD.attempts, NEW.error_kind)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_timeline_change() SET search_path FROM CURRENT;

-- A suspended run's awaited children are recorded whatever its status label (a run awaiting
-- an event and a child at once is woken by either).
DROP TRIGGER aiki_runs_record_waits ON aiki_runs;
CREATE TRIGGER aiki_runs_record_waits
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (NEW.status IN ('sleeping', 'awaiting_event', 'awaiting_retry', 'awaiting_child_workflow')
      AND OLD.status NOT IN ('sleeping', 'awaiting_event', 'awaiting_retry',
          'awaiting_child_workflow')
      AND NEW.wait_set IS NOT NULL)
EXECUTE FUNCTION aiki_record_waits();

DROP TRIGGER aiki_runs_drop_waits ON aiki_runs;
CREATE TRIGGER aiki_runs_drop_waits
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (OLD.status IN ('sleeping', 'awaiting_event', 'awaiting_retry', 'awaiting_child_workflow')
      AND NEW.status NOT IN ('sleeping', 'awaiting_event', 'awaiting_retry',
          'awaiting_child_workflow'))
EXECUTE FUNCTION aiki_drop_waits();

-- A child's end wakes every suspended run whose wait set names it (whatever its status
-- label), noting the cause for the timeline; and its parent if that waits without a wait set.
CREATE OR REPLACE FUNCTION aiki_wake_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL,
        change_actor = NULL, change_cause = 'child', change_rev = revision + 1
    WHERE id = NEW.parent_run_id AND status = 'awaiting_child_workflow' AND wait_set IS NULL;
    PERFORM 1 FROM aiki_runs
    WHERE id IN (SELECT waiter FROM aiki_waits WHERE child = NEW.id)
    ORDER BY id FOR UPDATE;
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL,
        change_actor = NULL, change_cause = 'child', change_rev = revision + 1
    WHERE status IN ('sleeping', 'awaiting_event', 'awaiting_retry', 'awaiting_child_workflow')
    AND id IN (
        SELECT w.waiter FROM aiki_waits w WHERE w.child = NEW.id
        AND (NOT w.all_of OR NEW.status <> 'completed' OR NOT EXISTS (
            SELECT 1 FROM aiki_waits o WHERE o.waiter = w.waiter AND o.child <> NEW.id)));
    DELETE FROM aiki_waits WHERE child = NEW.id;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_wake_parent() SET search_path FROM CURRENT;
