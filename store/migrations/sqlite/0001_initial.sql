-- 0001: the first T25 schema.
--
-- Times are REAL unix-epoch seconds from the database clock, ids are INTEGER and
-- shown as T-<n>, R-<n>, A-<n>. AUTOINCREMENT keeps ids monotonic and never reused,
-- which the event log and the fencing tokens rely on. STRICT tables reject a value
-- of the wrong type instead of storing it.

CREATE TABLE projects (
    name           TEXT PRIMARY KEY,
    repo_path      TEXT NOT NULL,
    default_branch TEXT NOT NULL
) STRICT;

CREATE TABLE tasks (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    project           TEXT    NOT NULL REFERENCES projects (name),
    title             TEXT    NOT NULL,
    type              TEXT    NOT NULL,
    description       TEXT    NOT NULL DEFAULT '',
    state             TEXT    NOT NULL,
    resume_state      TEXT,
    archived          INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
    merged            INTEGER NOT NULL DEFAULT 0 CHECK (merged IN (0, 1)),
    qa_loops          INTEGER NOT NULL DEFAULT 0,
    review_loops      INTEGER NOT NULL DEFAULT 0,
    error             TEXT,
    approved_plan_sha TEXT,
    created_at        REAL    NOT NULL,
    state_since       REAL    NOT NULL
) STRICT;

CREATE INDEX tasks_by_project ON tasks (project);
CREATE INDEX tasks_by_state ON tasks (state);

-- The event log. No foreign keys: it records facts, including about things a
-- reader may never have seen.
CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      REAL    NOT NULL,
    kind    TEXT    NOT NULL,
    task_id INTEGER,
    run_id  INTEGER,
    payload TEXT    NOT NULL  -- JSON: the event's own fields (Event.payload())
) STRICT;

CREATE INDEX events_by_task ON events (task_id, id);

CREATE TABLE runs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id             INTEGER NOT NULL REFERENCES tasks (id),
    stage               TEXT    NOT NULL,
    role                TEXT    NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts            INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    worker              TEXT,
    lease_token         INTEGER NOT NULL DEFAULT 0,  -- the fencing token; only ever grows
    lease_expires_at    REAL,
    not_before          REAL    NOT NULL,
    adapter             TEXT,
    adapter_reason      TEXT,
    cli_version         TEXT,
    model               TEXT,
    exit_code           INTEGER,
    error               TEXT,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens  INTEGER NOT NULL DEFAULT 0,
    usage_model         TEXT,
    cost_usd            REAL    NOT NULL DEFAULT 0.0,
    enqueued_at         REAL    NOT NULL,
    started_at          REAL,
    finished_at         REAL
) STRICT;

-- Claiming walks the queued runs oldest first; reaping looks at running leases by deadline.
CREATE INDEX runs_claimable ON runs (id, not_before) WHERE status = 'queued';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_by_task ON runs (task_id);

-- Artifact content, stored once per SHA-256.
CREATE TABLE blobs (
    sha256  TEXT    PRIMARY KEY,
    content BLOB    NOT NULL,
    size    INTEGER NOT NULL
) STRICT;

-- One row per write of an artifact, with its provenance.
CREATE TABLE artifacts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    sha256      TEXT    NOT NULL REFERENCES blobs (sha256),
    kind        TEXT    NOT NULL,
    media_type  TEXT    NOT NULL,
    task_id     INTEGER REFERENCES tasks (id),
    run_id      INTEGER REFERENCES runs (id),
    role        TEXT,
    adapter     TEXT,
    cli_version TEXT,
    model       TEXT,
    created_at  REAL    NOT NULL
) STRICT;

CREATE INDEX artifacts_by_task ON artifacts (task_id);
CREATE INDEX artifacts_by_sha256 ON artifacts (sha256);

-- The newest audit line's sequence number and hash: a single row, moved by compare-and-set.
CREATE TABLE audit_anchor (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT    NOT NULL
) STRICT;
