-- Durable records kept beside the log, never in it: state a face must keep but must not replay or show
-- (an A2A client's webhook and its credentials), grouped by space.
CREATE TABLE records (
    space TEXT NOT NULL,
    key   TEXT NOT NULL,
    body  BLOB NOT NULL,
    PRIMARY KEY (space, key)
) WITHOUT ROWID;
