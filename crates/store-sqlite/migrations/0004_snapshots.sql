-- State derived from the log up to `seq` (the engine's), so that a restart replays only what came after.
CREATE TABLE snapshots (
    name TEXT    PRIMARY KEY,
    seq  INTEGER NOT NULL,
    body BLOB    NOT NULL
) WITHOUT ROWID;
