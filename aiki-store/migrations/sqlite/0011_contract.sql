-- Contract v2: the outbox. Additive: releases from schema 9 on (the last one without the
-- compatibility record, and the operations migration's) read and write this schema.
UPDATE aiki_compat SET readable_from = 9;

-- Every status change gets a place in one store-wide sequence, so that delivery, dashboards
-- and `runs watch` read one ordered stream of "run X moved to Y" (`changes_since`). SQLite has
-- one writer, so a counter bumped inside the change's own statement orders the changes as they
-- commit; it only grows, so a number is never reused after old changes are purged. Changes
-- recorded before this migration have no number and are not in the stream.
CREATE TABLE aiki_outbox_seq (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
) STRICT;
INSERT INTO aiki_outbox_seq (id, last) VALUES (1, 0);

ALTER TABLE aiki_timeline ADD COLUMN seq INTEGER;
CREATE INDEX aiki_timeline_by_seq ON aiki_timeline (seq) WHERE seq IS NOT NULL;

CREATE TRIGGER aiki_timeline_number
AFTER INSERT ON aiki_timeline
WHEN NEW.seq IS NULL
BEGIN
    UPDATE aiki_outbox_seq SET last = last + 1 WHERE id = 1;
    UPDATE aiki_timeline SET seq = (SELECT last FROM aiki_outbox_seq WHERE id = 1)
    WHERE run_id = NEW.run_id AND revision = NEW.revision;
END;

-- A run leaving `running` by a statement that does not know pause requests (a release before
-- them) honours the request all the same: it lands in `paused` (an end stays an end), and no
-- request or stale mark outlives the claim it was made on. This release's statements clear
-- both themselves, so this never fires for them.
CREATE TRIGGER aiki_runs_leave_running_paused
AFTER UPDATE OF status ON aiki_runs
WHEN OLD.status = 'running' AND NEW.pause_requested_at IS NOT NULL
    AND NEW.status IN ('queued', 'scheduled', 'sleeping', 'awaiting_event', 'awaiting_retry',
        'awaiting_child_workflow')
BEGIN
    UPDATE aiki_runs
    SET status = 'paused', revision = revision + 1, due_at = NULL, wait_set = NULL,
        change_actor = NEW.pause_requested_by, change_cause = NULL, change_rev = revision + 1,
        pause_requested_at = NULL, pause_requested_by = NULL, stale_since = NULL
    WHERE id = NEW.id;
END;

CREATE TRIGGER aiki_runs_leave_running
AFTER UPDATE OF status ON aiki_runs
WHEN OLD.status = 'running' AND NEW.status <> 'running'
    AND (NEW.pause_requested_at IS NOT NULL OR NEW.stale_since IS NOT NULL)
    AND NOT (NEW.pause_requested_at IS NOT NULL AND NEW.status IN ('queued', 'scheduled', 'sleeping', 'awaiting_event', 'awaiting_retry',
        'awaiting_child_workflow'))
BEGIN
    UPDATE aiki_runs SET pause_requested_at = NULL, pause_requested_by = NULL, stale_since = NULL
    WHERE id = NEW.id;
END;

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
) STRICT;

-- A release before the operations migration publishes to `aiki_catalog` alone: its build's
-- entry reaches the per-build catalog too (this release writes `aiki_catalog_builds` first, so
-- for its own publications this inserts nothing). `WHERE NOT EXISTS`, not `OR IGNORE`: an outer
-- statement's conflict policy overrides a trigger's.
CREATE TRIGGER aiki_catalog_builds_of_older_releases_insert
AFTER INSERT ON aiki_catalog
BEGIN
    INSERT INTO aiki_catalog_builds
        (workflow, version, fingerprint, entry, published_by, published_at)
    SELECT NEW.workflow, NEW.version, NEW.fingerprint, NEW.entry, NEW.published_by,
        NEW.published_at
    WHERE NOT EXISTS (SELECT 1 FROM aiki_catalog_builds WHERE workflow = NEW.workflow
        AND version = NEW.version AND fingerprint = NEW.fingerprint);
END;

CREATE TRIGGER aiki_catalog_builds_of_older_releases_update
AFTER UPDATE ON aiki_catalog
BEGIN
    INSERT INTO aiki_catalog_builds
        (workflow, version, fingerprint, entry, published_by, published_at)
    SELECT NEW.workflow, NEW.version, NEW.fingerprint, NEW.entry, NEW.published_by,
        NEW.published_at
    WHERE NOT EXISTS (SELECT 1 FROM aiki_catalog_builds WHERE workflow = NEW.workflow
        AND version = NEW.version AND fingerprint = NEW.fingerprint);
END;
