-- Starts hinted after their commit. NOTIFY takes a database-wide lock from the start of a
-- commit to its end (the WAL flush included), so transactions that notify commit one after
-- another: with every start notifying from the trigger, concurrent starts ran at one
-- connection's commit rate. A release from this one on sets `aiki.start_hints` to
-- `after_commit` for the transaction of each start (in its insert statement) and sends the
-- hints of the queued runs it inserts itself, once they are committed, several in one
-- statement; for those inserts the trigger stays quiet. A release before this one does not set it, and its starts notify from the trigger as
-- before. An update that queues a run (a wake-up, a release, a requeue) still notifies from
-- the trigger. Additive: the previous release reads and writes this schema, as do releases
-- from schema 10 on.
UPDATE aiki_compat SET readable_from = 10;

CREATE OR REPLACE FUNCTION aiki_notify_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND current_setting('aiki.start_hints', true) = 'after_commit' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify(left('aiki_ready_' || TG_TABLE_SCHEMA, 63),
        NEW.pool || E'\t' || NEW.workflow || E'\t' || NEW.version);
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_notify_ready() SET search_path FROM CURRENT;
