-- Aiki store schema, SQLite. Times are milliseconds since the Unix epoch; JSON is kept as text,
-- byte for byte as written.

CREATE TABLE aiki_runs (
    id                 TEXT    NOT NULL PRIMARY KEY,
    namespace          TEXT    NOT NULL, -- `workflow@version`
    workflow           TEXT    NOT NULL,
    version            TEXT    NOT NULL,
    input              TEXT    NOT NULL,
    input_hash         TEXT    NOT NULL,
    reference_id       TEXT,
    pool               TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    revision           INTEGER NOT NULL,
    attempts           INTEGER NOT NULL,
    owner              TEXT,
    heartbeat_at       INTEGER,
    due_at             INTEGER,
    queued_at          INTEGER,
    output             TEXT,
    output_fingerprint TEXT,
    error_kind         TEXT,
    error_message      TEXT,
    parent_run_id      TEXT,
    parent_address     TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;

-- NULL reference ids never collide.
CREATE UNIQUE INDEX aiki_runs_reference ON aiki_runs (namespace, reference_id);
CREATE INDEX aiki_runs_claim ON aiki_runs (status, namespace, pool, queued_at);
CREATE INDEX aiki_runs_due ON aiki_runs (status, due_at);
CREATE INDEX aiki_runs_heartbeat ON aiki_runs (status, heartbeat_at);
CREATE INDEX aiki_runs_children ON aiki_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE aiki_entries (
    run_id        TEXT    NOT NULL,
    address       TEXT    NOT NULL,
    idx           INTEGER NOT NULL,
    kind          TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    output        TEXT,
    fingerprint   TEXT,
    attempts      INTEGER NOT NULL,
    error_kind    TEXT,
    error_message TEXT,
    retry_at      INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (run_id, address, idx)
) STRICT;

CREATE TABLE aiki_sleeps (
    run_id      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    idx         INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    wake_at     INTEGER NOT NULL,
    cancelled   INTEGER NOT NULL,
    PRIMARY KEY (run_id, name, idx)
) STRICT;

CREATE TABLE aiki_events (
    run_id       TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    idx          INTEGER NOT NULL,
    data         TEXT,
    timed_out    INTEGER NOT NULL,
    reference_id TEXT,
    received_at  INTEGER NOT NULL,
    PRIMARY KEY (run_id, name, idx)
) STRICT;

CREATE UNIQUE INDEX aiki_events_reference ON aiki_events (run_id, name, reference_id)
    WHERE reference_id IS NOT NULL;
