-- The event log: one row per stored message. `seq` is the gap-free position in the log, `body` the
-- message's canonical JSON; the other columns copy the fields reads filter on.
CREATE TABLE events (
    seq BIGINT PRIMARY KEY CHECK (seq > 0),
    id TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    from_agent TEXT NOT NULL,
    "type" TEXT NOT NULL,
    idempotency_key TEXT NULL,
    body TEXT NOT NULL
);

-- One index per filter, each ending in `seq` so a filtered read pages in log order without sorting.
CREATE INDEX events_run_id_seq ON events (run_id, seq);
CREATE INDEX events_thread_id_seq ON events (thread_id, seq);
CREATE INDEX events_task_id_seq ON events (task_id, seq);
CREATE INDEX events_from_agent_seq ON events (from_agent, seq);
CREATE INDEX events_type_seq ON events ("type", seq);

-- A client's idempotency key is unique within its run.
CREATE UNIQUE INDEX events_run_id_idempotency_key ON events (run_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
