-- 0001: the first T25 schema (Postgres). Mirrors sqlite/0001_initial.sql.
--
-- Times are timestamptz from the database clock; ids are bigint identities shown as
-- T-<n>, R-<n>, A-<n>. Identities only grow and are never reused, which the event log
-- and the fencing tokens rely on.

CREATE TABLE projects (
    name           text PRIMARY KEY,
    repo_path      text NOT NULL,
    default_branch text NOT NULL
);

CREATE TABLE tasks (
    id                bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project           text    NOT NULL REFERENCES projects (name),
    title             text    NOT NULL,
    type              text    NOT NULL,
    description       text    NOT NULL DEFAULT '',
    state             text    NOT NULL,
    resume_state      text,
    archived          boolean NOT NULL DEFAULT false,
    merged            boolean NOT NULL DEFAULT false,
    qa_loops          integer NOT NULL DEFAULT 0,
    review_loops      integer NOT NULL DEFAULT 0,
    error             text,
    approved_plan_sha text,
    created_at        timestamptz NOT NULL,
    state_since       timestamptz NOT NULL
);

CREATE INDEX tasks_by_project ON tasks (project);
CREATE INDEX tasks_by_state ON tasks (state);

-- The event log. No foreign keys: it records facts, including about things a
-- reader may never have seen.
--
-- Concurrent transactions take ids in one order and commit in another, so a reader
-- could see id 11 before id 10 commits and page past 10 for ever. Every event id is
-- therefore taken under a shared advisory lock held to commit (t25_next_event_id),
-- and a reader first settles a horizon under the exclusive lock (t25_event_horizon):
-- every id at or below it has committed or rolled back, so reading up to it leaves
-- no gap that can still fill. Writers never wait on each other; a reader waits only
-- for the event writes already in flight (single short statements).
CREATE SEQUENCE events_id_seq AS bigint;

CREATE FUNCTION t25_next_event_id() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7325001);
    RETURN nextval('events_id_seq');
END $$;

CREATE FUNCTION t25_event_horizon() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    horizon bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(7325001);
    SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO horizon FROM events_id_seq;
    RETURN horizon;
END $$;

CREATE TABLE events (
    id      bigint      PRIMARY KEY DEFAULT t25_next_event_id(),
    at      timestamptz NOT NULL,
    kind    text        NOT NULL,
    task_id bigint,
    run_id  bigint,
    payload jsonb       NOT NULL  -- the event's own fields (Event.payload())
);

ALTER SEQUENCE events_id_seq OWNED BY events.id;

CREATE INDEX events_by_task ON events (task_id, id);

CREATE TABLE runs (
    id                  bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id             bigint  NOT NULL REFERENCES tasks (id),
    stage               text    NOT NULL,
    role                text    NOT NULL,
    status              text    NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts            integer NOT NULL DEFAULT 0,
    max_attempts        integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    worker              text,
    lease_token         bigint  NOT NULL DEFAULT 0,  -- the fencing token; only ever grows
    lease_expires_at    timestamptz,
    not_before          timestamptz NOT NULL,
    adapter             text,
    adapter_reason      text,
    cli_version         text,
    model               text,
    exit_code           integer,
    error               text,
    input_tokens        bigint  NOT NULL DEFAULT 0,
    output_tokens       bigint  NOT NULL DEFAULT 0,
    cache_read_tokens   bigint  NOT NULL DEFAULT 0,
    cache_write_tokens  bigint  NOT NULL DEFAULT 0,
    usage_model         text,
    cost_usd            double precision NOT NULL DEFAULT 0.0,
    enqueued_at         timestamptz NOT NULL,
    started_at          timestamptz,
    finished_at         timestamptz
);

-- Claiming walks the queued runs oldest first; reaping looks at running leases by deadline.
CREATE INDEX runs_claimable ON runs (id) INCLUDE (not_before) WHERE status = 'queued';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_by_task ON runs (task_id);

-- Artifact content, stored once per SHA-256.
CREATE TABLE blobs (
    sha256  text   PRIMARY KEY,
    content bytea  NOT NULL,
    size    bigint NOT NULL
);

-- One row per write of an artifact, with its provenance.
CREATE TABLE artifacts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sha256      text   NOT NULL REFERENCES blobs (sha256),
    kind        text   NOT NULL,
    media_type  text   NOT NULL,
    task_id     bigint REFERENCES tasks (id),
    run_id      bigint REFERENCES runs (id),
    role        text,
    adapter     text,
    cli_version text,
    model       text,
    created_at  timestamptz NOT NULL
);

CREATE INDEX artifacts_by_task ON artifacts (task_id);
CREATE INDEX artifacts_by_sha256 ON artifacts (sha256);

-- The newest audit line's sequence number and hash: a single row, moved by compare-and-set.
CREATE TABLE audit_anchor (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint  NOT NULL,
    hash text    NOT NULL
);
