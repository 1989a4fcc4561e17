-- The timeline: every status change of a run, appended by a trigger inside the statement that
-- makes it (no round trip of its own). The reasons are the words of `StatusChange::reason_for`;
-- the actor is the executor leaving or taking `running`. Runs created before this migration
-- have no entries for what happened before it.
CREATE TABLE aiki_timeline (
    run_id      UUID    NOT NULL,
    revision    BIGINT  NOT NULL,
    from_status TEXT,
    to_status   TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    actor       TEXT,
    at          BIGINT  NOT NULL,
    PRIMARY KEY (run_id, revision)
);

CREATE FUNCTION aiki_timeline_start() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aiki_timeline (run_id, revision, from_status, to_status, reason, actor, at)
    VALUES (NEW.id, NEW.revision, NULL, NEW.status, 'started', NULL, NEW.created_at)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_timeline_start() SET search_path FROM CURRENT;

CREATE TRIGGER aiki_runs_timeline_start
AFTER INSERT ON aiki_runs
FOR EACH ROW
EXECUTE FUNCTION aiki_timeline_start();

CREATE FUNCTION aiki_timeline_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aiki_timeline (run_id, revision, from_status, to_status, reason, actor, at)
    VALUES (NEW.id, NEW.revision, OLD.status, NEW.status, CASE
        WHEN NEW.status = 'running' THEN 'claimed'
        WHEN NEW.status = 'completed' THEN 'completed'
        WHEN NEW.status = 'failed' THEN 'failed: ' || COALESCE(NEW.error_kind, 'unknown')
        WHEN NEW.status = 'cancelled' THEN 'cancelled'
        WHEN NEW.status = 'paused' THEN 'paused'
        WHEN OLD.status = 'paused' THEN 'resumed'
        WHEN NEW.status = 'stalled' THEN 'stalled: no worker claimed it in time'
        WHEN OLD.status = 'stalled' AND NEW.status = 'queued' THEN 'requeued'
        WHEN OLD.status = 'running' AND NEW.status = 'queued' THEN 'claim released'
        WHEN OLD.status = 'running' AND NEW.status = 'scheduled' AND NEW.attempts > OLD.attempts
            THEN 'workflow retry scheduled'
        WHEN OLD.status = 'running' AND NEW.status = 'scheduled'
            THEN 'suspended, and woken at once: what it awaits is there'
        WHEN OLD.status = 'running' THEN 'suspended'
        WHEN OLD.status = 'awaiting_child_workflow' AND NEW.status = 'scheduled'
            THEN 'a child run ended'
        WHEN OLD.status = 'awaiting_event' AND NEW.status = 'scheduled' THEN 'an event arrived'
        WHEN NEW.status = 'scheduled' THEN 'woken up'
        WHEN NEW.status = 'queued' THEN 'due'
        ELSE 'changed'
    END,
    CASE WHEN OLD.status = 'running' THEN OLD.owner WHEN NEW.status = 'running' THEN NEW.owner END, NEW.updated_at)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_timeline_change() SET search_path FROM CURRENT;

CREATE TRIGGER aiki_runs_timeline_change
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (NEW.status <> OLD.status)
EXECUTE FUNCTION aiki_timeline_change();
