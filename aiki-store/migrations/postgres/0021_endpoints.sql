-- Push endpoints: where an aiki server's dispatcher posts the queued runs of a workflow
-- version, signed with the endpoint's secrets; kept in the store so that every server agrees.
-- Additive: releases from schema 10 on read and write this schema (a release without it
-- pushes nothing).
UPDATE aiki_compat SET readable_from = 10;

-- One row per workflow version: its URL, its execution budget (ms), its secrets (a JSON array
-- of {id, secret, created_at, expires_at}), a revision for compare-and-set, and when it was
-- set and last written.
CREATE TABLE aiki_endpoints (
    workflow   TEXT    NOT NULL,
    version    TEXT    NOT NULL,
    url        TEXT    NOT NULL,
    budget_ms  BIGINT  NOT NULL,
    secrets    TEXT    NOT NULL,
    revision   BIGINT  NOT NULL,
    created_at BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (workflow, version)
);
