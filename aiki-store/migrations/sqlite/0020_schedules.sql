-- Schedules: durable records that start runs on a cron expression or an interval, and the log
-- of what each occurrence became. Additive: the previous release reads and writes this schema
-- (it fires no schedule), as do releases from schema 9 on.
UPDATE aiki_compat SET readable_from = 9;

-- One row per schedule: the record as JSON (definition, status, next occurrence, buffered
-- occurrence, last run, generation), beside the columns the sweep selects on.
CREATE TABLE aiki_schedules (
    name        TEXT    NOT NULL PRIMARY KEY,
    -- This schedule's own id: one deleted and created again under its name is another.
    id          TEXT    NOT NULL,
    record      TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    -- When the sweep takes the next occurrence (its time plus the schedule's jitter).
    fire_at     INTEGER,
    buffered_at INTEGER,
    last_run    TEXT,
    revision    INTEGER NOT NULL
) STRICT;

CREATE INDEX aiki_schedules_due ON aiki_schedules (fire_at) WHERE status = 'active';

-- What became of each occurrence (fired, skipped, buffered, missed, ...) and every status
-- change, unique by (schedule, key): the key of an occurrence is its time, so no two writers
-- ever fire one occurrence twice.
CREATE TABLE aiki_schedule_log (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule TEXT    NOT NULL,
    key      TEXT    NOT NULL,
    run_id   TEXT,
    entry    TEXT    NOT NULL,
    UNIQUE (schedule, key)
) STRICT;

CREATE INDEX aiki_schedule_log_runs ON aiki_schedule_log (run_id) WHERE run_id IS NOT NULL;
