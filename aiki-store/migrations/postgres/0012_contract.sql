-- Contract v2: the outbox. Additive: releases from schema 10 on (the last one without the
-- compatibility record, and the operations migration's) read and write this schema. The
-- columns are added without a default first, so no existing row is rewritten.
UPDATE aiki_compat SET readable_from = 10;

-- Every status change gets a number from one store-wide sequence and the id of the
-- transaction that made it, so that delivery, dashboards and `runs watch` read one ordered
-- stream of "run X moved to Y" (`changes_since`). Numbers are taken before their transactions
-- commit, so they become visible out of order; a reader pages by transaction snapshots (what
-- committed between two snapshots, in number order), which never misses nor repeats a change.
-- Changes recorded before this migration have no number and are not in the stream.
CREATE SEQUENCE aiki_timeline_seq;
ALTER TABLE aiki_timeline ADD COLUMN seq BIGINT;
ALTER TABLE aiki_timeline ADD COLUMN xid xid8;
ALTER TABLE aiki_timeline ALTER COLUMN seq SET DEFAULT nextval('aiki_timeline_seq');
ALTER TABLE aiki_timeline ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX aiki_timeline_xid ON aiki_timeline (xid) WHERE xid IS NOT NULL;
