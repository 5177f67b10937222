-- Lists of runs, threads and tasks, and the search index: rows derived from the log in `seq` order by
-- the shared fold (`clutch_store::lists`), never written by appends. `body` holds the row as its list
-- shows it (JSON); the other columns copy what filters and ordering need. `last_ms`/`ts_ms` are
-- milliseconds since the epoch of the row's last event / the event.
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    state TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX runs_last_seq ON runs (last_seq);
CREATE INDEX runs_state_last_seq ON runs (state, last_seq);

CREATE TABLE threads (
    thread_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX threads_last_seq ON threads (last_seq);
CREATE INDEX threads_run_id_last_seq ON threads (run_id, last_seq);

CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    parent_id TEXT NULL,
    workflow_id TEXT NULL,
    agent TEXT NULL,
    state TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX tasks_last_seq ON tasks (last_seq);
CREATE INDEX tasks_state_last_seq ON tasks (state, last_seq);
CREATE INDEX tasks_agent_last_seq ON tasks (agent, last_seq);
CREATE INDEX tasks_run_id_last_seq ON tasks (run_id, last_seq);
CREATE INDEX tasks_thread_id_last_seq ON tasks (thread_id, last_seq);
CREATE INDEX tasks_parent_id_last_seq ON tasks (parent_id, last_seq) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_workflow_id_last_seq ON tasks (workflow_id, last_seq) WHERE workflow_id IS NOT NULL;

-- One document per event with text (`lists::doc_text`). The `simple` configuration lower-cases and
-- neither stems nor drops stop words, so a search matches the words as written, in any language.
CREATE TABLE search_docs (
    seq BIGINT PRIMARY KEY,
    run_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    from_agent TEXT NOT NULL,
    ts_ms BIGINT NOT NULL,
    body TEXT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED
);
CREATE INDEX search_docs_tsv ON search_docs USING GIN (tsv);

-- How far the lists and the search index reach: every event with `seq` up to this one is in them.
CREATE TABLE lists_upto (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    seq BIGINT NOT NULL
);
INSERT INTO lists_upto (one, seq) VALUES (1, 0);
