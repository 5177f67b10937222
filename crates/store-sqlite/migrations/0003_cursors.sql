-- Named positions in the log kept for consumers that must resume after a restart (push delivery).
CREATE TABLE cursors (
    name TEXT    PRIMARY KEY,
    seq  INTEGER NOT NULL
) WITHOUT ROWID;
