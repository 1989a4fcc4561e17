-- Aiki's tables live in a schema of their own (default `aiki`). The wake-parent trigger's
-- function names `aiki_runs` unqualified: pin its search path to the schema it was created in,
-- so that it finds its table whatever the search path of the session whose update fires it.
ALTER FUNCTION aiki_wake_parent() SET search_path FROM CURRENT;
