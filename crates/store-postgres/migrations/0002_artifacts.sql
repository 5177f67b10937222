-- Content-addressed artifacts: the bytes under their SHA-256 (64 lower-case hex digits).
CREATE TABLE artifacts (
    sha256 TEXT PRIMARY KEY,
    size BIGINT NOT NULL CHECK (size >= 0),
    bytes BYTEA NOT NULL
);
