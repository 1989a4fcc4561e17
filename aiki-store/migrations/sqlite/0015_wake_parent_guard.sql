-- A run's end looks for the runs it wakes only when there can be some (it has a parent, or
-- `aiki_waits` rows name it), and finds its waiters through those rows: the waiters' update
-- walked every suspended run by the status index before (`+status` keeps the planner off it),
-- a cost paid by every run end that grew with the number of suspended runs. Same behaviour.
-- Releases from schema 9 on read and write this schema.
UPDATE aiki_compat SET readable_from = 9;

DROP TRIGGER aiki_runs_wake_parent;
CREATE TRIGGER aiki_runs_wake_parent
AFTER UPDATE OF status ON aiki_runs
WHEN NEW.status IN ('completed', 'failed', 'cancelled')
    AND OLD.status NOT IN ('completed', 'failed', 'cancelled')
    AND (NEW.parent_run_id IS NOT NULL
        OR EXISTS (SELECT 1 FROM aiki_waits WHERE child = NEW.id))
BEGIN
    UPDATE aiki_runs
    SET status = 'queued', revision = revision + 1, due_at = NULL,
        queued_at = NEW.updated_at, updated_at = NEW.updated_at, owner = NULL,
        heartbeat_at = NULL, change_actor = NULL, change_cause = 'child',
        change_rev = revision + 1
    WHERE id = NEW.parent_run_id AND status = 'awaiting_child_workflow' AND wait_set IS NULL;
    UPDATE aiki_runs
    SET status = 'queued', revision = revision + 1, due_at = NULL,
        queued_at = NEW.updated_at, updated_at = NEW.updated_at, owner = NULL,
        heartbeat_at = NULL, change_actor = NULL, change_cause = 'child',
        change_rev = revision + 1
    WHERE id IN (
        SELECT w.waiter FROM aiki_waits AS w WHERE w.child = NEW.id
        AND (w.all_of = 0 OR NEW.status <> 'completed' OR NOT EXISTS (
            SELECT 1 FROM aiki_waits AS o WHERE o.waiter = w.waiter AND o.child <> NEW.id)))
    AND +status IN ('sleeping', 'awaiting_event', 'awaiting_retry', 'awaiting_child_workflow');
    DELETE FROM aiki_waits WHERE child = NEW.id;
END;
