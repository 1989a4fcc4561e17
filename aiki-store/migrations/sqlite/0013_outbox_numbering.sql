-- The change stream's numbers are taken where a change's timeline row is written, instead of
-- by a trigger on the timeline that updated the row it had just inserted: one write per status
-- change less. Nothing else changes: releases from schema 9 on read and write this schema.
UPDATE aiki_compat SET readable_from = 9;

DROP TRIGGER aiki_timeline_number;

DROP TRIGGER aiki_runs_timeline_start;
CREATE TRIGGER aiki_runs_timeline_start
AFTER INSERT ON aiki_runs
BEGIN
    UPDATE aiki_outbox_seq SET last = last + 1 WHERE id = 1;
    INSERT OR IGNORE INTO aiki_timeline
        (run_id, revision, from_status, to_status, reason, actor, at, cause, retry, error_kind,
         seq)
    VALUES (NEW.id, NEW.revision, NULL, NEW.status, '',
        CASE WHEN NEW.change_rev = NEW.revision THEN NEW.change_actor END, NEW.created_at,
        CASE WHEN NEW.change_rev = NEW.revision THEN NEW.change_cause END, 0, NULL,
        (SELECT last FROM aiki_outbox_seq WHERE id = 1));
END;

DROP TRIGGER aiki_runs_timeline_change;
CREATE TRIGGER aiki_runs_timeline_change
AFTER UPDATE OF status ON aiki_runs
WHEN NEW.status <> OLD.status
BEGIN
    UPDATE aiki_outbox_seq SET last = last + 1 WHERE id = 1;
    INSERT OR IGNORE INTO aiki_timeline
        (run_id, revision, from_status, to_status, reason, actor, at, cause, retry, error_kind,
         seq)
    VALUES (NEW.id, NEW.revision, OLD.status, NEW.status, '',
        CASE WHEN NEW.change_rev = NEW.revision AND NEW.change_actor IS NOT NULL
                 THEN NEW.change_actor
             WHEN OLD.status = 'running' THEN OLD.owner
             WHEN NEW.status = 'running' THEN NEW.owner END,
        NEW.updated_at,
        CASE WHEN NEW.change_rev = NEW.revision THEN NEW.change_cause END,
        NEW.attempts > OLD.attempts, NEW.error_kind,
        (SELECT last FROM aiki_outbox_seq WHERE id = 1));
END;
