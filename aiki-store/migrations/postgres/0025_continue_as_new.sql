-- Continue-as-new: a run that continued names its successor (`continued_as`), the successor
-- its predecessor (`continued_from`). Additive (nullable columns without a default: no table
-- rewrite): the previous release reads and writes this schema (its statements name their
-- columns; a run that continued is, to it, a completed run), as do releases from schema 10 on.
UPDATE aiki_compat SET readable_from = 10;

ALTER TABLE aiki_runs ADD COLUMN continued_as UUID, ADD COLUMN continued_from UUID;
