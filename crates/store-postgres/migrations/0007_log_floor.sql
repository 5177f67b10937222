-- The highest `seq` ever assigned, kept when retention removes the newest events: `seq` never goes
-- back, so a cursor or a client's resume position past removed events stays valid.
CREATE TABLE log_floor (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    seq BIGINT NOT NULL
);
INSERT INTO log_floor (one, seq) VALUES (1, 0);
