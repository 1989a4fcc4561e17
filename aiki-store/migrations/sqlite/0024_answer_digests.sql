-- The digest of the request each first answer answers: a repeat of an operation sends the same
-- request, so one whose id comes with another request is refused (`idempotency_key_reused`)
-- instead of answered. Additive: the previous release reads and writes this schema (it names
-- the columns it inserts; its answers have no digest and are not checked), as do releases from
-- schema 9 on.
UPDATE aiki_compat SET readable_from = 9;

ALTER TABLE aiki_operation_answers ADD COLUMN digest TEXT;
