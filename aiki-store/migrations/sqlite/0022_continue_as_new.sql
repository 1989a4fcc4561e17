-- Continue-as-new: a run that continued names its successor (`continued_as`), the successor
-- its predecessor (`continued_from`). Additive: the previous release reads and writes this
-- schema (its statements name their columns; a run that continued is, to it, a completed run),
-- as do releases from schema 9 on.
UPDATE aiki_compat SET readable_from = 9;

ALTER TABLE aiki_runs ADD COLUMN continued_as TEXT;
ALTER TABLE aiki_runs ADD COLUMN continued_from TEXT;
