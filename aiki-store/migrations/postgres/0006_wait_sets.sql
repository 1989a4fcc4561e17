-- Wait sets: a suspension stores what the run waits on (`wait_set`, JSON, see `WaitSpec`), and
-- the run is woken only when that arrives. A run suspended before this migration has no wait
-- set and keeps the old rule: any event, or any of its children's ends, wakes it.
ALTER TABLE aiki_runs ADD COLUMN wait_set TEXT;

-- One row per child a suspended run still waits on, so that a child's end finds every run
-- that waits on it (a child shared by reference id has several) by index. Rows are written
-- when a run enters `awaiting_child_workflow` and dropped when it leaves or the child ends.
CREATE TABLE aiki_waits (
    child  UUID    NOT NULL,
    waiter UUID    NOT NULL,
    all_of BOOLEAN NOT NULL, -- the waiter waits for all of its children (or a failure)
    PRIMARY KEY (child, waiter)
);
CREATE INDEX aiki_waits_waiter ON aiki_waits (waiter);

-- The suspension locked the awaited children (FOR SHARE) before its update, so the statuses
-- read here stay as they are until it commits.
CREATE FUNCTION aiki_record_waits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aiki_waits (child, waiter, all_of)
    SELECT r.id, NEW.id, COALESCE((NEW.wait_set::json ->> 'all_children')::boolean, false)
    FROM json_array_elements(NEW.wait_set::json -> 'children') AS c
    JOIN aiki_runs r ON r.id = (c ->> 'id')::uuid
    WHERE r.status NOT IN ('completed', 'failed', 'cancelled')
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_record_waits() SET search_path FROM CURRENT;

CREATE TRIGGER aiki_runs_record_waits
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (NEW.status = 'awaiting_child_workflow' AND OLD.status <> 'awaiting_child_workflow'
      AND NEW.wait_set IS NOT NULL)
EXECUTE FUNCTION aiki_record_waits();

CREATE FUNCTION aiki_drop_waits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM aiki_waits WHERE waiter = NEW.id;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_drop_waits() SET search_path FROM CURRENT;

CREATE TRIGGER aiki_runs_drop_waits
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (OLD.status = 'awaiting_child_workflow' AND NEW.status <> 'awaiting_child_workflow')
EXECUTE FUNCTION aiki_drop_waits();

-- A child reaching a terminal status wakes, inside its own statement: its parent, if that
-- waits with no wait set (suspended before this migration); and every run whose wait set
-- names it, unless that run waits for all of its children, and this one completed, and
-- another is still running. The waiters are locked first (in id order): two children of one
-- all-of wait that end at once take turns, and the second sees the first's row gone.
CREATE OR REPLACE FUNCTION aiki_wake_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL
    WHERE id = NEW.parent_run_id AND status = 'awaiting_child_workflow' AND wait_set IS NULL;
    PERFORM 1 FROM aiki_runs
    WHERE id IN (SELECT waiter FROM aiki_waits WHERE child = NEW.id)
    ORDER BY id FOR UPDATE;
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL
    WHERE status = 'awaiting_child_workflow' AND id IN (
        SELECT w.waiter FROM aiki_waits w WHERE w.child = NEW.id
        AND (NOT w.all_of OR NEW.status <> 'completed' OR NOT EXISTS (
            SELECT 1 FROM aiki_waits o WHERE o.waiter = w.waiter AND o.child <> NEW.id)));
    DELETE FROM aiki_waits WHERE child = NEW.id;
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_wake_parent() SET search_path FROM CURRENT;

-- Every child end fires it now, not only a child run's (a shared child need not name the
-- waiter as its parent).
DROP TRIGGER aiki_runs_wake_parent ON aiki_runs;
CREATE TRIGGER aiki_runs_wake_parent
AFTER UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (NEW.status IN ('completed', 'failed', 'cancelled')
      AND OLD.status NOT IN ('completed', 'failed', 'cancelled'))
EXECUTE FUNCTION aiki_wake_parent();
