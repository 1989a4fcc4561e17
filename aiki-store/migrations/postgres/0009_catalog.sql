-- The catalog: per workflow version, what its code declares (input, output and event schemas
-- with their fingerprints, retry policies, tasks), published by the workers that register it,
-- so that tools without the code (the generic `aiki` CLI) validate a start input or an event
-- payload as the typed API does.
CREATE TABLE aiki_catalog (
    workflow     TEXT    NOT NULL,
    version      TEXT    NOT NULL,
    fingerprint  TEXT    NOT NULL,
    entry        TEXT    NOT NULL, -- JSON: aiki_store::CatalogEntry
    published_by TEXT    NOT NULL,
    published_at BIGINT  NOT NULL,
    PRIMARY KEY (workflow, version)
);
