-- Who each message is addressed to (`to[].agent_id`), for agents' inboxes: one row per recipient.
CREATE TABLE recipients (
    agent_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (agent_id, seq)
);
INSERT INTO recipients (agent_id, seq)
    SELECT DISTINCT r->>'agent_id', e.seq FROM events e, jsonb_array_elements(e.body::jsonb->'to') r
    ON CONFLICT DO NOTHING;
