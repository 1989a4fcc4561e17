-- Workers' heartbeats: who serves which workflow versions in which pool, last seen when. A
-- worker upserts its row every claim-refresh interval; `aiki workers` lists those seen lately,
-- and a queued run says whether any of them serves it.
CREATE TABLE aiki_workers (
    id           TEXT    NOT NULL PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    namespaces   TEXT    NOT NULL, -- JSON: [{"workflow": …, "version": …}, …]
    pool         TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);
CREATE INDEX aiki_workers_seen ON aiki_workers (last_seen_at);
