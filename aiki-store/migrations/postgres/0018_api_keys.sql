-- The API keys aiki servers check requests against, kept in the store so that every server in
-- front of it agrees. Additive: releases from schema 10 on read and write this schema (a
-- release without keys serves no API).
UPDATE aiki_compat SET readable_from = 10;

-- One row per key: its public id, the SHA-256 of its secret (never the secret), its scopes
-- (`executor,operator,read`), and when it was created and revoked.
CREATE TABLE aiki_api_keys (
    id            TEXT   NOT NULL PRIMARY KEY,
    name          TEXT   NOT NULL,
    secret_sha256 TEXT   NOT NULL,
    scopes        TEXT   NOT NULL,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT
);
