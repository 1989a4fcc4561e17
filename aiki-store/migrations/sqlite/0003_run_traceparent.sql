-- The W3C traceparent current when a run was started: every execution of the run links to it.
ALTER TABLE aiki_runs ADD COLUMN traceparent TEXT;
