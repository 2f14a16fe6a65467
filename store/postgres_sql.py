"""The SQL of the Postgres store, one named statement per operation.

Times are timestamptz. Lease deadlines and expiry checks use `clock_timestamp()`, the
database's clock at the moment of the check, never Python's: every worker on every host
agrees on when a lease ends. Every write that records an event does it in the same
statement, through a data-modifying CTE: one round trip, one implicit transaction.
Notifications are not sent here (see `postgres_events`): `pg_notify` inside these
statements would serialise every commit behind the global notify lock.
"""

from __future__ import annotations

from typing import Any

from store import reaping, shared_sql

# -- opening ------------------------------------------------------------------------------

# One key for "someone is migrating this database"; the event-id key is in 0001_initial.sql.
MIGRATION_LOCK_KEY = 7325000
LOCK_FOR_MIGRATION = "SELECT pg_advisory_lock($1)"
UNLOCK_FOR_MIGRATION = "SELECT pg_advisory_unlock($1)"
CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    id         integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)"""
# The relations of the current schema: an empty schema may become a T25 store, a
# schema with tables but no schema_migrations belongs to someone else.
SCHEMA_RELATIONS = """
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
ORDER BY c.relname"""
APPLIED_MIGRATIONS = "SELECT id, name FROM schema_migrations ORDER BY id"
RECORD_MIGRATION = "INSERT INTO schema_migrations (id, name) VALUES ($1, $2)"

# -- projects -----------------------------------------------------------------------------

UPSERT_PROJECT = """
INSERT INTO projects (name, repo_path, default_branch) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET repo_path = excluded.repo_path, default_branch = excluded.default_branch
RETURNING name, repo_path, default_branch"""
LIST_PROJECTS = "SELECT name, repo_path, default_branch FROM projects ORDER BY name"

# -- tasks --------------------------------------------------------------------------------

# $1 project, $2 title, $3 type, $4 description, $5 the TaskCreated payload,
# $6 the request key (0007): a retry whose first try committed finds it (CREATED_UNDER_KEY).
CREATE_TASK = """
WITH task AS (
    INSERT INTO tasks (project, title, type, description, state, created_at, state_since, request_key,
                       priority, after_tasks)
    SELECT name, $2::text, $3::text, $4::text, 'RECEIVED', now(), now(), $6::text, $7::integer, $8::text
    FROM projects WHERE name = $1
    ON CONFLICT (request_key) WHERE request_key IS NOT NULL DO NOTHING
    RETURNING *
), event AS (
    INSERT INTO events (at, kind, task_id, payload)
    SELECT created_at, 'task_created', id, $5::jsonb FROM task
    RETURNING id
)
SELECT task.*, event.id AS event_id FROM task, event"""
CREATED_UNDER_KEY = """
SELECT tasks.*, events.id AS event_id
FROM tasks JOIN events ON events.task_id = tasks.id AND events.kind = 'task_created'
WHERE tasks.request_key = $1"""
GET_TASK = "SELECT * FROM tasks WHERE id = $1"
GET_TASK_STATE = "SELECT state FROM tasks WHERE id = $1"
TASK_EXISTS = "SELECT 1 FROM tasks WHERE id = $1"


# $1 states (NULL: any), $2 project (NULL: any), $3 include archived.
def tasks_where(
    states: list[str] | None, project: str | None, include_archived: bool, merged: bool | None
) -> tuple[str, list[Any]]:
    """The WHERE of a read of tasks and its arguments, naming only what is asked: a state,
    merged or not, is then an equality the index on (state, merged, archived, id) answers in id
    (`x IS NULL OR …` in a prepared statement would leave the planner to sort)."""
    clauses: list[str] = ["TRUE"]
    args: list[Any] = []

    def arg(value: Any) -> str:
        args.append(value)
        return f"${len(args)}"

    if states is not None:
        clauses.append(
            f"state = {arg(states[0])}" if len(states) == 1 else f"state = ANY({arg(states)})"
        )
    if project is not None:
        clauses.append(f"project = {arg(project)}")
    if not include_archived:
        clauses.append("NOT archived")
    if merged is not None:
        clauses.append(f"merged = {arg(merged)}")
    return " AND ".join(clauses), args


def list_tasks(
    where: str, args: list[Any], *, after: int | None, limit: int | None, newest_first: bool
) -> tuple[str, list[Any]]:
    """Tasks by id, oldest or newest first, past the task numbered `after`, at most `limit`."""
    args = list(args)
    if after is not None:
        args.append(after)
        where += f" AND id {'<' if newest_first else '>'} ${len(args)}"
    args.append(limit)
    order = "DESC" if newest_first else "ASC"
    return f"SELECT * FROM tasks WHERE {where} ORDER BY id {order} LIMIT ${len(args)}", args


# $1 the project, $2 the wanted roles (a JSON array of {role, model}).
PAST_COSTS = shared_sql.past_costs(
    "SELECT * FROM jsonb_to_recordset($2::jsonb) AS w (role text, model text)", "$1"
)


def count_tasks(where: str) -> str:
    return f"SELECT state, COUNT(*) AS n FROM tasks WHERE {where} GROUP BY state"


def update_task(set_columns: list[str], *, with_state: bool) -> str:
    """The compare-and-set UPDATE of a task and its event, in one statement.

    $1 task id, $2 expected state, $3 event time, $4 event kind, $5 event run id,
    $6 event payload, then ($7 new state, if `with_state`) and one parameter per column
    of `set_columns` (names from MUTABLE_TASK_FIELDS, never from a caller's text).
    """
    sets: list[str] = []
    n = 7
    if with_state:  # the database's clock, as a run's times are: stall checks compare them
        sets += ["state = $7", "state_since = clock_timestamp()"]
        n = 8
    sets += [f"{name} = ${i}" for i, name in enumerate(set_columns, start=n)]
    if not sets:  # nothing to set: still check the state, and still return the row
        sets = ["state = state"]
    return f"""
WITH task AS (
    UPDATE tasks SET {", ".join(sets)} WHERE id = $1 AND state = $2 RETURNING *
), event AS (
    INSERT INTO events (at, kind, task_id, run_id, payload)
    SELECT $3::timestamptz, $4::text, id, $5::bigint, $6::jsonb FROM task
    RETURNING id
)
SELECT task.*, event.id AS event_id FROM task, event"""


# -- events -------------------------------------------------------------------------------

INSERT_EVENT = """
INSERT INTO events (at, kind, task_id, run_id, payload) VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING id"""
# An event appended on its own, maybe a remote worker's ($6 `sent`, 0018): kept once a run.
APPEND_EVENT = """
INSERT INTO events (at, kind, task_id, run_id, payload, sent) VALUES ($1, $2, $3, $4, $5::jsonb, $6)
ON CONFLICT (run_id, sent) WHERE sent IS NOT NULL DO NOTHING RETURNING id"""
# The event a worker sent that was kept already (0018's `sent`): $1 run id, $2 sent.
SENT_EVENT = "SELECT id FROM events WHERE run_id = $1 AND sent = $2"
# After a connection died mid-write: did that write commit? The same event (its time is
# the writer's clock, to the microsecond, and its payload) is already there. The task's
# own events are looked at (an index), or, for an event about no task, the newest ones.
# $1 at, $2 kind, $3 task id, $4 run id, $5 payload.
SAME_EVENT = """
SELECT id FROM events
WHERE at = $1 AND kind = $2 AND task_id IS NOT DISTINCT FROM $3 AND run_id IS NOT DISTINCT FROM $4
  AND payload = $5::jsonb
ORDER BY id DESC LIMIT 1"""
# The task as it is, with the id of its event written by a change that committed (above).
TASK_WITH_EVENT = "SELECT tasks.*, $2::bigint AS event_id FROM tasks WHERE id = $1"
# A reader first reads without any lock: the events right after its cursor with no
# id missing between them are settled (any id below a visible one that is still in
# flight would show as a hole). Only a hole right at the cursor, or a read filtered
# by task, settles a horizon under the lock (see 0001_initial.sql), and only when
# something past the cursor is visible at all. The horizon must be its own
# statement: a statement's snapshot is taken before it waits for the lock.
EVENTS_FROM = "SELECT * FROM events WHERE id > $1 ORDER BY id LIMIT $2"
EVENT_HORIZON = """
SELECT t25_event_horizon() WHERE EXISTS (
    SELECT 1 FROM events WHERE id > $1 AND ($2::bigint IS NULL OR task_id = $2)
)"""
EVENTS_AFTER = "SELECT * FROM events WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3"
TASK_EVENTS_AFTER = (
    "SELECT * FROM events WHERE id > $1 AND id <= $2 AND task_id = $4 ORDER BY id LIMIT $3"
)
LAST_EVENT_ID = "SELECT coalesce(max(id), 0) FROM events WHERE id <= $1"
# $1 after, $2 horizon, $3 limit, $4 task (NULL: every task's), $5 kind.
KIND_EVENTS_AFTER = """
SELECT * FROM events WHERE kind = $5 AND id > $1 AND id <= $2
    AND ($4::bigint IS NULL OR task_id = $4) ORDER BY id LIMIT $3"""
# The decisions are named literally too, so the planner walks their partial index (0017).
DECISIONS_AFTER = KIND_EVENTS_AFTER.replace("WHERE", "WHERE kind = 'decision_recorded' AND", 1)
# One task's events of one kind (and, for output, of one stream $6): a range of 0018's index.
TASK_KIND_EVENTS_AFTER = """
SELECT * FROM events WHERE task_id = $4 AND kind = $5 AND id > $1 AND id <= $2
    AND ($6::text IS NULL OR payload->>'stream' = $6) ORDER BY id LIMIT $3"""
# A task's network records, named literally so the planner walks their partial index (0021).
TASK_NETWORK_AFTER = """
SELECT * FROM events WHERE task_id = $4 AND kind = 'run_output' AND payload->>'stream' = 'network'
    AND id > $1 AND id <= $2 ORDER BY id LIMIT $3"""
# A run's newest events before $2, newest first, none past the settled horizon: one backward
# walk of 0019's index on (run, id). The run is a range and the order names it, which only
# that index gives: asked as `run_id = $1 ORDER BY id`, the planner may walk the primary key
# back from the newest event of all, filtering by run — for a run long finished, every event
# written since.
RUN_EVENTS_BEFORE = """
SELECT * FROM events WHERE run_id BETWEEN $1 AND $1 AND id < $2
    AND id <= (SELECT t25_event_horizon()) ORDER BY run_id DESC, id DESC LIMIT $3"""
# What a waiting reader checks: is anything newer than its cursor visible yet?
NEWEST_EVENT_ID = "SELECT coalesce(max(id), 0) FROM events"
EVENTS_CHANNEL = "t25_events"
# A wake-up needs no durability: its commit does not wait for the WAL flush. (One
# simple-protocol script, so the SET LOCAL and the notify share one transaction.)
NOTIFY = f"SET LOCAL synchronous_commit = off; SELECT pg_notify('{EVENTS_CHANNEL}', '')"

# -- runs and leases ----------------------------------------------------------------------

_SECONDS = "make_interval(secs => {})"

# $1 task id, $2 stage, $3 role, $4 max attempts, $5 the RunQueued payload, $6 only while
# the task is in that stage. Nothing is written when the stage has its queued or running
# run already (the index of 0007): ACTIVE_RUN then finds it.
ENQUEUE_RUN = """
WITH run AS (
    INSERT INTO runs (task_id, stage, role, max_attempts, not_before, enqueued_at, priority)
    SELECT tasks.id, $2::text, $3::text, $4::integer, clock.t, clock.t, tasks.priority
    FROM tasks, (SELECT clock_timestamp() AS t) AS clock
    WHERE tasks.id = $1 AND (NOT $6::boolean OR tasks.state = $2::text)
    ON CONFLICT (task_id, stage) WHERE status IN ('queued', 'running') DO NOTHING
    RETURNING *
), event AS (
    INSERT INTO events (at, kind, task_id, run_id, payload)
    SELECT enqueued_at, 'run_queued', task_id, id, $5::jsonb FROM run
    RETURNING id
)
SELECT run.*, event.id AS event_id FROM run, event"""
# The queued or running run of a task's stage, with the RunQueued event that queued it.
ACTIVE_RUN = """
SELECT runs.*, coalesce((
    SELECT min(events.id) FROM events
    WHERE events.task_id = runs.task_id AND events.run_id = runs.id AND events.kind = 'run_queued'
), 0) AS event_id
FROM runs WHERE task_id = $1 AND stage = $2 AND status IN ('queued', 'running')"""
# The run a committed entry into a stage queued: the first of that stage after its event.
RUN_QUEUED_AFTER = """
SELECT runs.*, events.id AS event_id
FROM events JOIN runs ON runs.id = events.run_id
WHERE events.task_id = $1 AND events.kind = 'run_queued' AND events.id > $2 AND runs.stage = $3
ORDER BY events.id LIMIT 1"""
GET_RUN = "SELECT * FROM runs WHERE id = $1"
RUN_EXISTS = "SELECT 1 FROM runs WHERE id = $1"
GET_RUN_WITH_CLOCK = """
SELECT *, extract(epoch FROM clock_timestamp() - lease_expires_at)::float8 AS expired_ago
FROM runs WHERE id = $1"""
# $1 task id (NULL: any), $2 status (NULL: any).
LIST_RUNS = """
SELECT * FROM runs WHERE ($1::bigint IS NULL OR task_id = $1) AND ($2::text IS NULL OR status = $2)
ORDER BY id"""

_LEASE = "id, task_id, lease_token, worker, lease_expires_at"

# One statement: pick the claimable run of highest priority, then oldest (0016's index, so
# a walk of the index, however long the queue), skipping rows another claimer holds
# this instant, and lease it under a fresh token: the next of the store's sequence (0007),
# so no two claims of any runs share one. $1 worker, $2 ttl seconds, $3 the claim's key.
CLAIM_RUN = f"""
UPDATE runs
SET status = 'running', attempts = attempts + 1, lease_token = nextval('lease_tokens'), worker = $1,
    claim_key = $3,
    lease_expires_at = clock_timestamp() + {_SECONDS.format("$2::float8")},
    started_at = clock_timestamp(), finished_at = NULL
WHERE id = (
    SELECT id FROM runs WHERE status = 'queued' AND not_before <= clock_timestamp()
    ORDER BY priority DESC, id FOR UPDATE SKIP LOCKED LIMIT 1
)
RETURNING {_LEASE}"""

# After a connection died mid-claim: did that claim commit? Its run is running under its key.
CLAIMED_UNDER_KEY = f"SELECT {_LEASE} FROM runs WHERE status = 'running' AND claim_key = $1"

# The condition that a lease still holds: the current token, presented by the worker
# that claimed it, the run still running, its deadline ahead. $1 run, $2 token, $3 worker.
_LEASE_HOLDS = (
    "id = $1 AND lease_token = $2 AND worker = $3 AND status = 'running'"
    " AND lease_expires_at > clock_timestamp()"
)

HEARTBEAT = f"""
UPDATE runs SET lease_expires_at = clock_timestamp() + {_SECONDS.format("$4::float8")}
WHERE {_LEASE_HOLDS}
RETURNING {_LEASE}"""

# The outcome and its RunFinished event in one statement, only while the lease holds.
# $1 id, $2 token, $3 worker, $4 status, $5 exit code, $6 error, $7 adapter, $8 adapter
# reason, $9 cli version, $10 model, $11-$14 tokens (in, out, cache read, cache write),
# $15 usage model, $16 cost, $17 the RunFinished payload, $18 the requests' tokens (JSON),
# $19 the CLI's session, $20 the session it resumed.
COMPLETE_RUN = f"""
WITH run AS (
    UPDATE runs
    SET status = $4, exit_code = $5, error = $6, adapter = $7, adapter_reason = $8, cli_version = $9,
        model = $10, input_tokens = $11, output_tokens = $12, cache_read_tokens = $13,
        cache_write_tokens = $14, usage_model = $15, cost_usd = $16, requests = $18,
        session_id = $19, resumed_session = $20,
        finished_at = clock_timestamp(), lease_expires_at = NULL
    WHERE {_LEASE_HOLDS}
    RETURNING *
), event AS (
    INSERT INTO events (at, kind, task_id, run_id, payload)
    SELECT finished_at, 'run_finished', task_id, id, $17::jsonb FROM run
    RETURNING id
)
SELECT run.*, event.id AS event_id FROM run, event"""
# After a connection died mid-completion: did that completion commit? Only the holder
# of the current token can finish a run with a RunFinished event.
FINISHED_UNDER_TOKEN = """
SELECT runs.*, events.id AS event_id, events.payload AS event_payload
FROM runs JOIN events ON events.run_id = runs.id AND events.kind = 'run_finished'
WHERE runs.id = $1 AND runs.lease_token = $2 AND runs.worker = $3 AND runs.status IN ('succeeded', 'failed', 'cancelled')
ORDER BY events.id DESC LIMIT 1"""

# Handing a run back does not count as an attempt.
RELEASE_RUN = f"""
UPDATE runs
SET status = 'queued', attempts = attempts - 1, worker = NULL, lease_expires_at = NULL, started_at = NULL
WHERE {_LEASE_HOLDS}
RETURNING *"""

# A fresh token makes any live lease on the run stale.
CANCEL_RUNS = """
UPDATE runs
SET status = 'cancelled', lease_token = nextval('lease_tokens'), lease_expires_at = NULL, finished_at = clock_timestamp()
WHERE task_id = $1 AND status IN ('queued', 'running')
RETURNING *"""

CANCEL_QUEUED_RUNS = CANCEL_RUNS.replace("IN ('queued', 'running')", "= 'queued'")

# A lapsed lease goes back to the queue after a backoff that doubles with each attempt
# used ($1 the first delay, $2 the longest), or fails the run when that was its last
# attempt. It counts as an attempt only when the run's agent was started in it, or when
# the reap before was free too (the rule: store.reaping). One conditional statement: a
# lease that a worker is completing right now is skipped, not waited for, and its
# completion decides (see _LEASE_HOLDS).
_COUNTS = reaping.counts("(events.payload->>'attempt')::int")
_LAST = f"({_COUNTS} AND attempts >= max_attempts)"
REAP_EXPIRED = f"""
UPDATE runs
SET status = CASE WHEN {_LAST} THEN 'failed' ELSE 'queued' END,
    attempts = CASE WHEN {_COUNTS} THEN attempts ELSE attempts - 1 END,
    error = CASE
        WHEN NOT {_COUNTS} THEN {reaping.free_error("attempts")}
        WHEN attempts >= max_attempts AND attempts = 1 THEN 'lease expired on its only attempt'
        WHEN attempts >= max_attempts THEN 'lease expired on all ' || attempts || ' attempts'
        ELSE 'lease expired on attempt ' || attempts || ' of ' || max_attempts
    END,
    not_before = CASE WHEN {_LAST} THEN not_before ELSE clock_timestamp()
        + {_SECONDS.format("least($1::float8 * power(2, least(attempts - 1, 30)), $2::float8)")} END,
    worker = CASE WHEN {_LAST} THEN worker END,
    finished_at = CASE WHEN {_LAST} THEN clock_timestamp() END,
    lease_expires_at = NULL
WHERE status = 'running' AND id IN (
    SELECT id FROM runs WHERE status = 'running' AND lease_expires_at <= clock_timestamp()
    ORDER BY id FOR UPDATE SKIP LOCKED
)
RETURNING *"""

# -- artifacts ----------------------------------------------------------------------------

INSERT_BLOB = (
    "INSERT INTO blobs (sha256, content, size) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING"
)
# $1 sha256, $2 kind, $3 media type, $4 task id, $5 run id, $6 role, $7 adapter, $8 cli version, $9 model.
INSERT_ARTIFACT = """
INSERT INTO artifacts (sha256, kind, media_type, task_id, run_id, role, adapter, cli_version, model, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, clock_timestamp())
RETURNING *"""
# After a connection died mid-write: did that write commit? The newest artifact of the same
# content and provenance (the arguments of INSERT_ARTIFACT).
SAME_ARTIFACT = """
SELECT * FROM artifacts
WHERE sha256 = $1 AND kind = $2 AND media_type = $3 AND task_id IS NOT DISTINCT FROM $4
  AND run_id IS NOT DISTINCT FROM $5 AND role IS NOT DISTINCT FROM $6
  AND adapter IS NOT DISTINCT FROM $7 AND cli_version IS NOT DISTINCT FROM $8
  AND model IS NOT DISTINCT FROM $9
ORDER BY id DESC LIMIT 1"""
_ARTIFACT_COLUMNS = "artifacts.*, blobs.size AS size"
GET_ARTIFACT = f"""
SELECT {_ARTIFACT_COLUMNS}, blobs.content AS content, blobs.chunks AS chunks
FROM artifacts JOIN blobs USING (sha256) WHERE artifacts.id = $1"""
# Content stored in chunks (store._chunks): its blob row first ($1 sha256, $2 size, $3 the
# number of chunks), returned only when it is new; then each chunk ($1 sha256, $2 n, $3 bytes).
INSERT_CHUNKED_BLOB = """
INSERT INTO blobs (sha256, content, size, chunks) VALUES ($1, ''::bytea, $2, $3)
ON CONFLICT (sha256) DO NOTHING RETURNING sha256"""
INSERT_BLOB_CHUNK = "INSERT INTO blob_chunks (sha256, n, content) VALUES ($1, $2, $3)"
GET_BLOB_CHUNK = "SELECT content FROM blob_chunks WHERE sha256 = $1 AND n = $2"
LIST_ARTIFACTS = f"""
SELECT {_ARTIFACT_COLUMNS} FROM artifacts JOIN blobs USING (sha256)
WHERE ($1::bigint IS NULL OR artifacts.task_id = $1) ORDER BY artifacts.id"""
NEWEST_ARTIFACT = shared_sql.newest_artifact(_ARTIFACT_COLUMNS, "$1", "$2")

# -- audit anchor -------------------------------------------------------------------------

GET_AUDIT_ANCHOR = "SELECT seq, hash FROM audit_anchor WHERE id = 1"
INSERT_AUDIT_ANCHOR = "INSERT INTO audit_anchor (id, seq, hash) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING RETURNING id"
# Held by the transaction that holds the audit log; waits at most the lock_timeout set with it.
LOCK_AUDIT = "SELECT pg_advisory_xact_lock(hashtextextended('t25 audit log', 0))"
LOCK_AUDIT_TIMEOUT = "SET LOCAL lock_timeout = '120s'"
MOVE_AUDIT_ANCHOR = "UPDATE audit_anchor SET seq = $1, hash = $2 WHERE id = 1 AND seq = $3 AND hash = $4 RETURNING id"

# -- audit chain (0005) ---------------------------------------------------------------------

# $1 seqs, $2 lines, $3 hashes, $4 tasks, $5 times: one insert for every line of a write.
INSERT_AUDIT_LINES = """
INSERT INTO audit_chain (seq, line, hash, task, at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])"""
# $1 after seq, $2 limit, $3 task (NULL: every task's).
AUDIT_LINES = """
SELECT seq, line, hash, task, at FROM audit_chain
WHERE seq > $1 AND ($3::text IS NULL OR task = $3) ORDER BY seq LIMIT $2"""

# The store's clock: the one lease deadlines and run and state times are taken from.
NOW = "SELECT clock_timestamp()"

COST_BY_TASK = """SELECT task_id, SUM(cost_usd) AS cost FROM runs
WHERE $1::bigint[] IS NULL OR task_id = ANY($1::bigint[]) GROUP BY task_id"""
TOKENS_BY_TASK = shared_sql.tokens_by_task("task_id = ANY($1::bigint[])")
COST_GROUPS = shared_sql.cost_groups("json_array_length(requests::json)", None)
COST_GROUPS_SINCE = shared_sql.cost_groups("json_array_length(requests::json)", "$1")
COSTLIEST_TASKS = shared_sql.costliest_tasks("$1")
