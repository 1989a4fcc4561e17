-- Contract v2: the outbox. Additive: releases from schema 9 on (the last one without the
-- compatibility record, and the operations migration's) read and write this schema.
UPDATE aiki_compat SET readable_from = 9;

-- Every status change gets a place in one store-wide sequence, so that delivery, dashboards
-- and `runs watch` read one ordered stream of "run X moved to Y" (`changes_since`). SQLite has
-- one writer, so a counter bumped inside the change's own statement orders the changes as they
-- commit; it only grows, so a number is never reused after old changes are purged. Changes
-- recorded before this migration have no number and are not in the stream.
CREATE TABLE aiki_outbox_seq (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
) STRICT;
INSERT INTO aiki_outbox_seq (id, last) VALUES (1, 0);

ALTER TABLE aiki_timeline ADD COLUMN seq INTEGER;
CREATE INDEX aiki_timeline_seq ON aiki_timeline (seq) WHERE seq IS NOT NULL;

CREATE TRIGGER aiki_timeline_number
AFTER INSERT ON aiki_timeline
WHEN NEW.seq IS NULL
BEGIN
    UPDATE aiki_outbox_seq SET last = last + 1 WHERE id = 1;
    UPDATE aiki_timeline SET seq = (SELECT last FROM aiki_outbox_seq WHERE id = 1)
    WHERE run_id = NEW.run_id AND revision = NEW.revision;
END;
