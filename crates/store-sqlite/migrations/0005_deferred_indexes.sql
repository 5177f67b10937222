-- Secondary indexes cover only rows marked `indexed`; the writer marks rows in bulk, so that a commit
-- dirties the pages of the table's tail, not one leaf per agent, run, thread, task and type.
ALTER TABLE events ADD COLUMN indexed INTEGER NOT NULL DEFAULT 1;
DROP INDEX events_run;
DROP INDEX events_thread;
DROP INDEX events_task;
DROP INDEX events_from;
DROP INDEX events_type;
CREATE INDEX events_run ON events (run_id, seq) WHERE indexed;
CREATE INDEX events_thread ON events (thread_id, seq) WHERE indexed;
CREATE INDEX events_task ON events (task_id, seq) WHERE indexed;
CREATE INDEX events_from ON events (from_agent, seq) WHERE indexed;
CREATE INDEX events_type ON events (type, seq) WHERE indexed;
CREATE TABLE indexed_upto (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    seq INTEGER NOT NULL
);
INSERT INTO indexed_upto (one, seq) SELECT 1, coalesce(max(seq), 0) FROM events;
