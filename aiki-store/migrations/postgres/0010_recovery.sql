-- Recovery: a failed run records the task call whose unhandled failure failed it (what a
-- retry runs again), and a retry (`failed` → `queued`) is named so in the timeline; a fork
-- records the run it was forked from and the first run of its lineage.
ALTER TABLE aiki_runs ADD COLUMN error_address TEXT;
ALTER TABLE aiki_runs ADD COLUMN error_index BIGINT;
ALTER TABLE aiki_runs ADD COLUMN forked_from UUID;
ALTER TABLE aiki_runs ADD COLUMN lineage_root UUID;

CREATE OR REPLACE FUNCTION aiki_timeline_change() RETURNS trigger LANGUAGE plpgsql AS $$
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
        WHEN OLD.status = 'failed' AND NEW.status = 'queued' THEN 'retried'
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
