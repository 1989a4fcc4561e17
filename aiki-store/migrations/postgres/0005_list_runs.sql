-- Listing runs newest first, by (created_at, id): one index range and no sort for the main
-- filters (a workflow version and status; a reference id; a parent; no filter at all). The
-- other filters narrow within the range.
CREATE INDEX aiki_runs_list_version ON aiki_runs (workflow, version, status, created_at, id);
CREATE INDEX aiki_runs_list_reference ON aiki_runs (reference_id, created_at, id)
    WHERE reference_id IS NOT NULL;
CREATE INDEX aiki_runs_list_parent ON aiki_runs (parent_run_id, created_at, id)
    WHERE parent_run_id IS NOT NULL;
CREATE INDEX aiki_runs_list_created ON aiki_runs (created_at, id);
