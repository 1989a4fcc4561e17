-- A child run reaching a terminal status wakes its parent if the parent waits on its
-- children, in the same statement as the child's transition (a trigger runs inside it): the
-- terminal transition needs no transaction of its own.
CREATE TRIGGER aiki_runs_wake_parent
AFTER UPDATE OF status ON aiki_runs
WHEN NEW.status IN ('completed', 'failed', 'cancelled')
    AND OLD.status NOT IN ('completed', 'failed', 'cancelled')
    AND NEW.parent_run_id IS NOT NULL
BEGIN
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL
    WHERE id = NEW.parent_run_id AND status = 'awaiting_child_workflow';
END;
