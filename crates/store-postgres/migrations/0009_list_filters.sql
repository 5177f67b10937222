-- The lists' filters on their rows' arrays (a run's agents, a thread's participants, a task's
-- requirements) read a column of their own instead of parsing each row's body as it is scanned: on
-- a list of 10,000 tasks, parsing the bodies cost 116 ms a page for `capability=`.
ALTER TABLE runs ADD COLUMN agents jsonb GENERATED ALWAYS AS ((body::jsonb) -> 'agents') STORED;
ALTER TABLE threads ADD COLUMN participants jsonb GENERATED ALWAYS AS ((body::jsonb) -> 'participants') STORED;
ALTER TABLE tasks ADD COLUMN requires jsonb GENERATED ALWAYS AS ((body::jsonb) -> 'requires') STORED;
