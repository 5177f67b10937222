-- The append-only event log. `seq` is assigned by the single writer, gap-free from 1.
CREATE TABLE events (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    run_id          TEXT    NOT NULL,
    thread_id       TEXT    NOT NULL,
    task_id         TEXT    NOT NULL,
    from_agent      TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    idempotency_key TEXT,
    body            TEXT    NOT NULL
);
CREATE INDEX events_run ON events (run_id, seq);
CREATE INDEX events_thread ON events (thread_id, seq);
CREATE INDEX events_task ON events (task_id, seq);
CREATE INDEX events_from ON events (from_agent, seq);
CREATE INDEX events_type ON events (type, seq);
CREATE UNIQUE INDEX events_idempotency ON events (run_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
