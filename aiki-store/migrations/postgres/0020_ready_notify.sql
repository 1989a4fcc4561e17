-- Ready hints: whenever a run becomes `queued` (a start, an event or a child's end that wakes
-- it, a due timer swept, a released or requeued claim, a resume), the statement that does it
-- notifies the schema's channel, so listening workers and servers claim at once instead of at
-- their next poll. Task writes never touch the status and never notify. NOTIFY takes a lock at
-- commit, so only these changes pay for it; identical payloads in one transaction are sent
-- once. Additive: releases from schema 10 on read and write this schema (their changes notify
-- too; a release without a listener polls as before).
UPDATE aiki_compat SET readable_from = 10;

-- The channel: `aiki_ready_` and the schema's name, cut at 63 bytes (PostgreSQL's limit). The
-- payload: `pool TAB workflow TAB version`.
CREATE FUNCTION aiki_notify_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(left('aiki_ready_' || TG_TABLE_SCHEMA, 63),
        NEW.pool || E'\t' || NEW.workflow || E'\t' || NEW.version);
    RETURN NULL;
END;
$$;
ALTER FUNCTION aiki_notify_ready() SET search_path FROM CURRENT;

CREATE TRIGGER aiki_runs_notify_ready
AFTER INSERT OR UPDATE OF status ON aiki_runs
FOR EACH ROW
WHEN (NEW.status = 'queued')
EXECUTE FUNCTION aiki_notify_ready();
