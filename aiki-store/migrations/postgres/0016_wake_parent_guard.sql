-- A run's end looks for the runs it wakes only when there can be some: its parent (when it has
-- one) and the waiters its `aiki_waits` rows name (one primary-key probe), and it finds those
-- waiters by their ids. Before, every end ran the waiters' update, whose generic plan walked the
-- suspended runs by status (about 30 pages per run end on the bench, a third of the cost of
-- finishing a run that nothing waits on, growing with the number of suspended runs).
-- Same behaviour; the function only. Releases from schema 10 on read and write this schema.
UPDATE aiki_compat SET readable_from = 10;

CREATE OR REPLACE FUNCTION aiki_wake_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent_run_id IS NOT NULL THEN
        UPDATE aiki_runs
        SET status = 'queued', revision = revision + 1, due_at = NULL,
            queued_at = NEW.updated_at, updated_at = NEW.updated_at, owner = NULL,
            heartbeat_at = NULL, change_actor = NULL, change_cause = 'child',
            change_rev = revision + 1
        WHERE id = NEW.parent_run_id AND status = 'awaiting_child_workflow'
        AND wait_set IS NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM aiki_waits WHERE child = NEW.id) THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM aiki_runs
    WHERE id IN (SELECT waiter FROM aiki_waits WHERE child = NEW.id)
    ORDER BY id FOR UPDATE;
    UPDATE aiki_runs
    SET status = 'queued', revision = revision + 1, due_at = NULL,
        queued_at = NEW.updated_at, updated_at = NEW.updated_at, owner = NULL,
        heartbeat_at = NULL, change_actor = NULL, change_cause = 'child',
        change_rev = revision + 1
    WHERE id = ANY(ARRAY(
        SELECT w.waiter FROM aiki_waits w WHERE w.child = NEW.id
        AND (NOT w.all_of OR NEW.status <> 'completed' OR NOT EXISTS (
            SELECT 1 FROM aiki_waits o WHERE o.waiter = w.waiter AND o.child <> NEW.id))))
    AND status IN ('sleeping', 'awaiting_event', 'awaiting_retry', 'awaiting_child_workflow');
    DELETE FROM aiki_waits WHERE child = NEW.id;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_wake_parent() SET search_path FROM CURRENT;
