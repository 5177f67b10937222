-- Who each message is addressed to (`to[].agent_id`), for agents' inboxes: one row per recipient.
CREATE TABLE recipients (
    agent_id TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (agent_id, seq)
) WITHOUT ROWID;
INSERT OR IGNORE INTO recipients (agent_id, seq)
    SELECT json_extract(r.value, '$.agent_id'), e.seq FROM events e, json_each(e.body, '$.to') r;
