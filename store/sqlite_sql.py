"""The SQL of the SQLite store, one named statement per operation.

Every time is REAL unix-epoch seconds. `NOW` is the store's clock: the time its
transaction began, read once from the clock the store was opened with (the machine's,
unless a seeded board injects its own) and the same for every statement of it. Lease
deadlines and expiry checks use it; every process sharing the file is on this machine,
so they agree. Migrations are stamped by SQLite's own clock (`julianday('now')`, with
millisecond precision): they run before the store has a clock.
"""

from __future__ import annotations

from store import reaping, shared_sql

NOW = "t25_now()"  # registered on the store's connection (store.sqlite.SqliteStore.open)
_SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

# -- opening ------------------------------------------------------------------------------

# Whose the file is: its application_id and how many schema objects it holds, read in one
# statement, so one snapshot: read apart, a process creating the file could commit between the
# two reads, and a new T25 database be taken for someone else's (no id yet, objects already).
IDENTITY = """
SELECT (SELECT application_id FROM pragma_application_id) AS app,
       (SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%') AS objects"""
CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at REAL NOT NULL
) STRICT"""
HAS_SCHEMA_MIGRATIONS = (
    "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'"
)
APPLIED_MIGRATIONS = "SELECT id, name FROM schema_migrations ORDER BY id"
RECORD_MIGRATION = (
    f"INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, {_SQLITE_NOW})"
)

# -- projects -----------------------------------------------------------------------------

UPSERT_PROJECT = """
INSERT INTO projects (name, repo_path, default_branch) VALUES (:name, :repo_path, :default_branch)
ON CONFLICT (name) DO UPDATE SET repo_path = excluded.repo_path, default_branch = excluded.default_branch
RETURNING *"""
LIST_PROJECTS = "SELECT * FROM projects ORDER BY name"

# -- tasks --------------------------------------------------------------------------------

INSERT_TASK = f"""
INSERT INTO tasks (project, title, type, description, state, created_at, state_since, request_key,
                   priority, after_tasks)
SELECT name, :title, :type, :description, 'RECEIVED', {NOW}, {NOW}, :request_key, :priority,
    :after_tasks
FROM projects WHERE name = :project
RETURNING *"""
# The task filed under a key, and its TaskCreated event.
CREATED_UNDER_KEY = """
SELECT tasks.*, events.id AS event_id
FROM tasks JOIN events ON events.task_id = tasks.id AND events.kind = 'task_created'
WHERE tasks.request_key = ?"""
GET_TASK = "SELECT * FROM tasks WHERE id = ?"
GET_TASK_STATE = "SELECT state FROM tasks WHERE id = ?"
LIST_TASKS = "SELECT * FROM tasks WHERE {where} ORDER BY id {order} LIMIT ?"
COUNT_TASKS = "SELECT state, COUNT(*) AS n FROM tasks WHERE {where} GROUP BY state"
# :wanted a JSON array of {role, model}, :project the project.
PAST_COSTS = shared_sql.past_costs(
    "SELECT json_extract(value, '$.role') AS role, json_extract(value, '$.model') AS model"
    " FROM json_each(:wanted)",
    ":project",
)


def update_task(set_columns: list[str], *, with_state: bool) -> str:
    """The compare-and-set UPDATE of a task; column names come from MUTABLE_TASK_FIELDS."""
    sets = [f"{name} = :{name}" for name in set_columns]
    if with_state:
        sets[:0] = ["state = :state", "state_since = :state_since"]
    if not sets:  # nothing to set: still check the state, and still return the row
        sets = ["state = state"]
    return f"UPDATE tasks SET {', '.join(sets)} WHERE id = :id AND state = :expected RETURNING *"


# -- events -------------------------------------------------------------------------------

INSERT_EVENT = """
INSERT INTO events (at, kind, task_id, run_id, payload, sent) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, sent) WHERE sent IS NOT NULL DO NOTHING RETURNING id"""
# The event a worker sent that was kept already (0018's `sent`).
SENT_EVENT = "SELECT id FROM events WHERE run_id = ? AND sent = ?"
EVENTS_AFTER = "SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?"
TASK_EVENTS_AFTER = "SELECT * FROM events WHERE id > ? AND task_id = ? ORDER BY id LIMIT ?"
KIND_EVENTS_AFTER = (
    "SELECT * FROM events WHERE kind = :kind AND id > :after"
    " AND (:task IS NULL OR task_id = :task) ORDER BY id LIMIT :limit"
)
# The decisions are named literally too, so the planner walks their partial index (0017).
DECISIONS_AFTER = KIND_EVENTS_AFTER.replace("WHERE", "WHERE kind = 'decision_recorded' AND", 1)
# A run's newest events before an id, newest first: a backward walk of 0019's index.
RUN_EVENTS_BEFORE = "SELECT * FROM events WHERE run_id = ? AND id < ? ORDER BY id DESC LIMIT ?"
# One task's events of one kind (and, for output, of one stream): a range of 0018's index.
TASK_KIND_EVENTS_AFTER = """
SELECT * FROM events WHERE task_id = :task AND kind = :kind AND id > :after
    AND (:stream IS NULL OR json_extract(payload, '$.stream') = :stream) ORDER BY id LIMIT :limit"""
# A task's network records, named literally for their partial index (0021), and that index
# named: SQLite's planner takes 0018's (task, kind, id) for a range of the task's output.
TASK_NETWORK_AFTER = """
SELECT * FROM events INDEXED BY events_network WHERE task_id = :task AND kind = 'run_output'
    AND json_extract(payload, '$.stream') = 'network' AND id > :after ORDER BY id LIMIT :limit"""
LAST_EVENT_ID = "SELECT coalesce(max(id), 0) FROM events"
GET_EVENT = "SELECT * FROM events WHERE id = ?"

# -- runs and leases ----------------------------------------------------------------------

INSERT_RUN = f"""
INSERT INTO runs (task_id, stage, role, max_attempts, not_before, enqueued_at, priority)
SELECT id, :stage, :role, :max_attempts, {NOW}, {NOW}, priority FROM tasks
WHERE id = :task_id AND (NOT :while_in_stage OR state = :stage)
RETURNING *"""
# The queued or running run of a task's stage (at most one: 0007's index), with the
# RunQueued event that queued it.
ACTIVE_RUN = """
SELECT runs.*, coalesce((
    SELECT min(events.id) FROM events
    WHERE events.task_id = runs.task_id AND events.run_id = runs.id AND events.kind = 'run_queued'
), 0) AS event_id
FROM runs WHERE task_id = :task_id AND stage = :stage AND status IN ('queued', 'running')"""
GET_RUN = "SELECT * FROM runs WHERE id = ?"
GET_RUN_WITH_CLOCK = f"SELECT *, {NOW} AS now FROM runs WHERE id = ?"
LIST_RUNS = "SELECT * FROM runs WHERE {where} ORDER BY id"

# The largest token any run holds (an index: 0007). Tokens only ever grow, and every
# write is serialised by the file's write lock, so one more is a token no claim had.
_NEXT_TOKEN = "(SELECT coalesce(max(lease_token), 0) + 1 FROM runs)"

# One statement picks the claimable run of highest priority, then oldest (0016's index),
# and leases it under a fresh token, unique across the store.
CLAIM_RUN = f"""
UPDATE runs
SET status = 'running', attempts = attempts + 1, lease_token = {_NEXT_TOKEN}, worker = :worker,
    lease_expires_at = {NOW} + :ttl, started_at = {NOW}, finished_at = NULL
WHERE id = (
    SELECT id FROM runs WHERE status = 'queued' AND not_before <= {NOW}
    ORDER BY priority DESC, id LIMIT 1
)
RETURNING *"""

# The condition that a lease still holds: the current token, presented by the worker that
# claimed it, the run still running, its deadline ahead.
_LEASE_HOLDS = (
    "id = :id AND lease_token = :token AND worker = :worker AND status = 'running'"
    f" AND lease_expires_at > {NOW}"
)

HEARTBEAT = f"UPDATE runs SET lease_expires_at = {NOW} + :ttl WHERE {_LEASE_HOLDS} RETURNING *"

COMPLETE_RUN = f"""
UPDATE runs
SET status = :status, exit_code = :exit_code, error = :error, adapter = :adapter,
    adapter_reason = :adapter_reason, cli_version = :cli_version, model = :model,
    input_tokens = :input_tokens, output_tokens = :output_tokens,
    cache_read_tokens = :cache_read_tokens, cache_write_tokens = :cache_write_tokens,
    usage_model = :usage_model, cost_usd = :cost_usd, requests = :requests,
    session_id = :session_id, resumed_session = :resumed_session,
    finished_at = {NOW}, lease_expires_at = NULL
WHERE {_LEASE_HOLDS}
RETURNING *"""

# Handing a run back does not count as an attempt.
RELEASE_RUN = f"""
UPDATE runs
SET status = 'queued', attempts = attempts - 1, worker = NULL, lease_expires_at = NULL, started_at = NULL
WHERE {_LEASE_HOLDS}
RETURNING *"""

# A fresh token (one each, past the largest) makes any live lease on the run stale.
CANCEL_RUNS = f"""
UPDATE runs
SET status = 'cancelled', lease_token = top.token + ended.n, lease_expires_at = NULL,
    finished_at = {NOW}
FROM (SELECT coalesce(max(lease_token), 0) AS token FROM runs) AS top,
    (SELECT id, row_number() OVER (ORDER BY id) AS n FROM runs
     WHERE task_id = ? AND status IN ('queued', 'running')) AS ended
WHERE runs.id = ended.id
RETURNING *"""

CANCEL_QUEUED_RUNS = CANCEL_RUNS.replace("IN ('queued', 'running')", "= 'queued'")

# A lapsed lease goes back to the queue after a backoff that doubles with each attempt
# used (:delay the first, :max_delay the longest), or fails the run when that was its
# last attempt. It counts as an attempt only when the run's agent was started in it, or
# when the reap before was free too (the rule: store.reaping).
_COUNTS = reaping.counts("json_extract(events.payload, '$.attempt')")
_LAST = f"({_COUNTS} AND attempts >= max_attempts)"
# Read first, so that a process with nothing to reap never takes the write lock: twice a
# second otherwise, and a `t25 run` stopped (Ctrl-Z) inside it would hold up every writer.
ANY_EXPIRED = f"SELECT 1 FROM runs WHERE status = 'running' AND lease_expires_at <= {NOW} LIMIT 1"
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
    not_before = CASE WHEN {_LAST} THEN not_before
        ELSE {NOW} + min(:delay * (1 << min(attempts - 1, 30)), :max_delay) END,
    worker = CASE WHEN {_LAST} THEN worker END,
    finished_at = CASE WHEN {_LAST} THEN {NOW} END,
    lease_expires_at = NULL
WHERE status = 'running' AND lease_expires_at <= {NOW}
RETURNING *"""

# -- artifacts ----------------------------------------------------------------------------

INSERT_BLOB = "INSERT OR IGNORE INTO blobs (sha256, content, size) VALUES (?, ?, ?)"
TASK_EXISTS = "SELECT 1 FROM tasks WHERE id = ?"
RUN_EXISTS = "SELECT 1 FROM runs WHERE id = ?"
INSERT_ARTIFACT = f"""
INSERT INTO artifacts (sha256, kind, media_type, task_id, run_id, role, adapter, cli_version, model, created_at)
VALUES (:sha256, :kind, :media_type, :task_id, :run_id, :role, :adapter, :cli_version, :model, {NOW})
RETURNING *"""
_ARTIFACT_COLUMNS = "artifacts.*, blobs.size AS size"
GET_ARTIFACT = f"""
SELECT {_ARTIFACT_COLUMNS}, blobs.content AS content, blobs.chunks AS chunks
FROM artifacts JOIN blobs USING (sha256) WHERE artifacts.id = ?"""
# Content stored in chunks (store._chunks): its blob row first (sha256, size, the number of
# chunks), returned only when it is new; then each chunk (sha256, n, bytes).
INSERT_CHUNKED_BLOB = """
INSERT INTO blobs (sha256, content, size, chunks) VALUES (?, X'', ?, ?)
ON CONFLICT (sha256) DO NOTHING RETURNING sha256"""
INSERT_BLOB_CHUNK = "INSERT INTO blob_chunks (sha256, n, content) VALUES (?, ?, ?)"
GET_BLOB_CHUNK = "SELECT content FROM blob_chunks WHERE sha256 = ? AND n = ?"
LIST_ARTIFACTS = f"SELECT {_ARTIFACT_COLUMNS} FROM artifacts JOIN blobs USING (sha256) WHERE {{where}} ORDER BY artifacts.id"
NEWEST_ARTIFACT = shared_sql.newest_artifact(_ARTIFACT_COLUMNS, "?", "?")

# -- audit anchor -------------------------------------------------------------------------

GET_AUDIT_ANCHOR = "SELECT seq, hash FROM audit_anchor WHERE id = 1"
INSERT_AUDIT_ANCHOR = "INSERT INTO audit_anchor (id, seq, hash) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id"
MOVE_AUDIT_ANCHOR = (
    "UPDATE audit_anchor SET seq = ?, hash = ? WHERE id = 1 AND seq = ? AND hash = ? RETURNING id"
)

COST_BY_TASK = "SELECT task_id, SUM(cost_usd) AS cost FROM runs {where} GROUP BY task_id"
TOKENS_BY_TASK = shared_sql.tokens_by_task("task_id IN (SELECT value FROM json_each(?))")
COST_GROUPS = shared_sql.cost_groups("json_array_length(requests)", None)
COST_GROUPS_SINCE = shared_sql.cost_groups("json_array_length(requests)", "?")
COSTLIEST_TASKS = shared_sql.costliest_tasks("?")
