-- Aiki store schema, PostgreSQL. Times are milliseconds since the Unix epoch (BIGINT, from the
-- runtime's clock). JSON is kept as TEXT, not JSONB: the runtime never queries inside it, TEXT
-- keeps the bytes exactly as written (JSONB reorders keys, drops duplicate keys and refuses
-- `\u0000`), and writing TEXT skips JSONB's parse.

CREATE TABLE aiki_runs (
    id                 UUID    NOT NULL PRIMARY KEY,
    namespace          TEXT    NOT NULL, -- `workflow@version`
    workflow           TEXT    NOT NULL,
    version            TEXT    NOT NULL,
    input              TEXT    NOT NULL,
    input_hash         TEXT    NOT NULL,
    reference_id       TEXT,
    pool               TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    revision           BIGINT  NOT NULL,
    attempts           BIGINT  NOT NULL,
    owner              TEXT,
    heartbeat_at       BIGINT,
    due_at             BIGINT,
    queued_at          BIGINT,
    output             TEXT,
    output_fingerprint TEXT,
    error_kind         TEXT,
    error_message      TEXT,
    parent_run_id      UUID,
    parent_address     TEXT,
    created_at         BIGINT  NOT NULL,
    updated_at         BIGINT  NOT NULL
);

-- NULL reference ids never collide.
CREATE UNIQUE INDEX aiki_runs_reference ON aiki_runs (namespace, reference_id);
CREATE INDEX aiki_runs_claim ON aiki_runs (status, namespace, pool, queued_at);
CREATE INDEX aiki_runs_due ON aiki_runs (status, due_at);
CREATE INDEX aiki_runs_heartbeat ON aiki_runs (status, heartbeat_at);
CREATE INDEX aiki_runs_children ON aiki_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE aiki_entries (
    run_id        UUID    NOT NULL,
    address       TEXT    NOT NULL,
    idx           BIGINT  NOT NULL,
    kind          TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    output        TEXT,
    fingerprint   TEXT,
    attempts      BIGINT  NOT NULL,
    error_kind    TEXT,
    error_message TEXT,
    retry_at      BIGINT,
    updated_at    BIGINT  NOT NULL,
    PRIMARY KEY (run_id, address, idx)
);

CREATE TABLE aiki_sleeps (
    run_id      UUID    NOT NULL,
    name        TEXT    NOT NULL,
    idx         BIGINT  NOT NULL,
    duration_ms BIGINT  NOT NULL,
    wake_at     BIGINT  NOT NULL,
    cancelled   BOOLEAN NOT NULL,
    PRIMARY KEY (run_id, name, idx)
);

CREATE TABLE aiki_events (
    run_id       UUID    NOT NULL,
    name         TEXT    NOT NULL,
    idx          BIGINT  NOT NULL,
    data         TEXT,
    timed_out    BOOLEAN NOT NULL,
    reference_id TEXT,
    received_at  BIGINT  NOT NULL,
    PRIMARY KEY (run_id, name, idx)
);

CREATE UNIQUE INDEX aiki_events_reference ON aiki_events (run_id, name, reference_id)
    WHERE reference_id IS NOT NULL;
