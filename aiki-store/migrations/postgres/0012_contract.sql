-- Contract v2: the outbox. Additive: releases from schema 10 on (the last one without the
-- compatibility record, and the operations migration's) read and write this schema. The
-- columns are added without a default first, so no existing row is rewritten.
UPDATE aiki_compat SET readable_from = 10;

-- Every status change gets a number from one store-wide sequence and the id of the
-- transaction that made it, so that delivery, dashboards and `runs watch` read one ordered
-- stream of "run X moved to Y" (`changes_since`). Numbers are taken before their transactions
-- commit, so they become visible out of order; a reader pages by transaction snapshots (what
-- committed between two snapshots, in number order), which never misses nor repeats a change.
-- Changes recorded before this migration have no number and are not in the stream.
CREATE SEQUENCE aiki_timeline_seq;
ALTER TABLE aiki_timeline ADD COLUMN seq BIGINT;
ALTER TABLE aiki_timeline ADD COLUMN xid xid8;
ALTER TABLE aiki_timeline ALTER COLUMN seq SET DEFAULT nextval('aiki_timeline_seq');
ALTER TABLE aiki_timeline ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
-- The index readers page by is built by the next migration, concurrently: building it here
-- would block every status change for as long as a large timeline takes to scan.

-- A run leaving `running` by a statement that does not know pause requests (a release before
-- them) honours the request all the same: it lands in `paused` (an end stays an end), and no
-- request or stale mark outlives the claim it was made on. This release's statements clear
-- both themselves, so this never fires for them.
CREATE FUNCTION aiki_leave_running() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.pause_requested_at IS NOT NULL AND NEW.status IN ('queued', 'scheduled', 'sleeping',
            'awaiting_event', 'awaiting_retry', 'awaiting_child_workflow') THEN
        UPDATE aiki_runs
        SET status = 'paused', revision = revision + 1, due_at = NULL, wait_set = NULL,
            change_actor = NEW.pause_requested_by, change_cause = NULL,
            change_rev = revision + 1,
            pause_requested_at = NULL, pause_requested_by = NULL, stale_since = NULL
        WHERE id = NEW.id;
    ELSE
        UPDATE aiki_runs
        SET pause_requested_at = NULL, pause_requested_by = NULL, stale_since = NULL
        WHERE id = NEW.id;
    END IF;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_leave_running() SET search_path FROM CURRENT;

CREATE TRIGGER aiki_runs_leave_running
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (OLD.status = 'running' AND NEW.status <> 'running'
      AND (NEW.pause_requested_at IS NOT NULL OR NEW.stale_since IS NOT NULL))
EXECUTE FUNCTION aiki_leave_running();

-- The tasks each build's runs were seen calling (a worker declares only the tasks registered
-- one by one): kept apart from the build's entry, so that the pods of one build add to the
-- list instead of overwriting each other's.
CREATE TABLE aiki_catalog_tasks (
    workflow    TEXT NOT NULL,
    version     TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    name        TEXT NOT NULL,
    declaration TEXT NOT NULL, -- JSON: aiki_store::TaskDeclaration
    PRIMARY KEY (workflow, version, fingerprint, name)
);

-- A release before the operations migration publishes to `aiki_catalog` alone: its build's
-- entry reaches the per-build catalog too (this release writes `aiki_catalog_builds` first, so
-- for its own publications this inserts nothing).
CREATE FUNCTION aiki_catalog_build_of_older_release() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aiki_catalog_builds
        (workflow, version, fingerprint, entry, published_by, published_at)
    VALUES (NEW.workflow, NEW.version, NEW.fingerprint, NEW.entry, NEW.published_by,
        NEW.published_at)
    ON CONFLICT (workflow, version, fingerprint) DO NOTHING;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_catalog_build_of_older_release() SET search_path FROM CURRENT;

CREATE TRIGGER aiki_catalog_builds_of_older_releases
AFTER INSERT OR UPDATE ON aiki_catalog
FOR EACH ROW EXECUTE FUNCTION aiki_catalog_build_of_older_release();
