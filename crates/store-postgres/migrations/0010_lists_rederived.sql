-- The lists' rows changed meaning: a workflow's root row shows its workflow's state, a run counts only
-- its planned tasks, a task sent to an agent by name is that agent's from its request, and a retry's
-- notice makes a task `retrying`. Rows derived by an older build are dropped, so the indexer derives
-- them again from the whole log (reads wait for it a short while, as after any start).
TRUNCATE runs, threads, tasks, search_docs;
UPDATE lists_upto SET seq = 0;
