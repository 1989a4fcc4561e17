-- A child run reaching a terminal status wakes its parent if the parent waits on its
-- children, inside the child's transition statement. The trigger's UPDATE takes its own
-- snapshot after the child's row lock was granted, so a parent whose suspension locked the
-- child (FOR SHARE) and committed first is seen waiting and woken; a parent suspending after
-- the child committed sees the child ended and never sleeps. The terminal transition needs
-- no transaction of its own.
CREATE FUNCTION aiki_wake_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL
    WHERE id = NEW.parent_run_id AND status = 'awaiting_child_workflow';
    RETURN NULL;
END;
$$;

CREATE TRIGGER aiki_runs_wake_parent
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (NEW.status IN ('completed', 'failed', 'cancelled')
      AND OLD.status NOT IN ('completed', 'failed', 'cancelled')
      AND NEW.parent_run_id IS NOT NULL)
EXECUTE FUNCTION aiki_wake_parent();
