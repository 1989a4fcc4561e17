-- The first answers of operations sent with an id (an aiki server's idempotency keys), recorded
-- in the transaction of the write they answer, so that a repeat of the write, through any
-- server, gets the first answer instead of doing it again. Additive: releases from schema 9 on
-- read and write this schema (a release without it records no answers).
UPDATE aiki_compat SET readable_from = 9;

-- One row per operation: `<kind>/<operation id>`, the answer as JSON, and when it was
-- recorded (unix ms), by which the leader's sweep forgets it.
CREATE TABLE aiki_operation_answers (
    id          TEXT    NOT NULL PRIMARY KEY,
    answer      TEXT    NOT NULL,
    recorded_at INTEGER NOT NULL
) STRICT;

CREATE INDEX aiki_operation_answers_by_age ON aiki_operation_answers (recorded_at);
