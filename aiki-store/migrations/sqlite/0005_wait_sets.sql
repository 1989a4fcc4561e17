-- Wait sets: a suspension stores what the run waits on (`wait_set`, JSON, see `WaitSpec`), and
-- the run is woken only when that arrives. A run suspended before this migration has no wait
-- set and keeps the old rule: any event, or any of its children's ends, wakes it.
ALTER TABLE aiki_runs ADD COLUMN wait_set TEXT;

-- One row per child a suspended run still waits on, so that a child's end finds every run
-- that waits on it (a child shared by reference id has several) by index. Rows are written
-- when a run enters `awaiting_child_workflow` and dropped when it leaves or the child ends.
CREATE TABLE aiki_waits (
    child  TEXT    NOT NULL,
    waiter TEXT    NOT NULL,
    all_of INTEGER NOT NULL, -- 1: the waiter waits for all of its children (or a failure)
    PRIMARY KEY (child, waiter)
);
CREATE INDEX aiki_waits_waiter ON aiki_waits (waiter);

CREATE TRIGGER aiki_runs_record_waits
AFTER UPDATE OF status ON aiki_runs
WHEN NEW.status = 'awaiting_child_workflow' AND OLD.status <> 'awaiting_child_workflow'
    AND NEW.wait_set IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO aiki_waits (child, waiter, all_of)
    SELECT r.id, NEW.id, COALESCE(json_extract(NEW.wait_set, '$.all_children'), 0)
    FROM json_each(NEW.wait_set, '$.children') AS c
    JOIN aiki_runs AS r ON r.id = json_extract(c.value, '$.id')
    WHERE r.status NOT IN ('completed', 'failed', 'cancelled');
END;

CREATE TRIGGER aiki_runs_drop_waits
AFTER UPDATE OF status ON aiki_runs
WHEN OLD.status = 'awaiting_child_workflow' AND NEW.status <> 'awaiting_child_workflow'
BEGIN
    DELETE FROM aiki_waits WHERE waiter = NEW.id;
END;

-- A child reaching a terminal status wakes, inside its own statement: its parent, if that
-- waits with no wait set (suspended before this migration); and every run whose wait set
-- names it, unless that run waits for all of its children, and this one completed, and
-- another is still running.
DROP TRIGGER aiki_runs_wake_parent;
CREATE TRIGGER aiki_runs_wake_parent
AFTER UPDATE OF status ON aiki_runs
WHEN NEW.status IN ('completed', 'failed', 'cancelled')
    AND OLD.status NOT IN ('completed', 'failed', 'cancelled')
BEGIN
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL
    WHERE id = NEW.parent_run_id AND status = 'awaiting_child_workflow' AND wait_set IS NULL;
    UPDATE aiki_runs
    SET status = 'scheduled', revision = revision + 1, due_at = NEW.updated_at,
        updated_at = NEW.updated_at, owner = NULL, heartbeat_at = NULL
    WHERE status = 'awaiting_child_workflow' AND id IN (
        SELECT w.waiter FROM aiki_waits AS w WHERE w.child = NEW.id
        AND (w.all_of = 0 OR NEW.status <> 'completed' OR NOT EXISTS (
            SELECT 1 FROM aiki_waits AS o WHERE o.waiter = w.waiter AND o.child <> NEW.id)));
    DELETE FROM aiki_waits WHERE child = NEW.id;
END;
