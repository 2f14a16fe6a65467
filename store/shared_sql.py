"""SQL both stores run alike: the sweeper's look at the queue, an approval's sum of the past,
and what runs cost.

Each store passes in what its dialect writes differently (its parameters, how it reads a
JSON array as rows); the rule itself is written once, so both backends answer the same.
"""

from __future__ import annotations

# A task with no run queued or running (runs_by_task), and whether any run is (each over
# the partial index of its status, however long the queue).
NO_ACTIVE_RUN = (
    "NOT EXISTS (SELECT 1 FROM runs WHERE runs.task_id = tasks.id"
    " AND runs.status IN ('queued', 'running'))"
)
HAS_ACTIVE_RUNS = (
    "SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'queued')"
    " OR EXISTS (SELECT 1 FROM runs WHERE status = 'running') AS active"
)


def past_costs(wanted: str, project: str) -> str:
    """SQL: a project's succeeded runs of each wanted role (and its model, chosen or used,
    when one is named), summed per task; one row a role that has any. `wanted` selects the
    rows (role, model) asked for, `project` is the project's parameter."""
    return f"""
WITH wanted AS ({wanted}), per_task AS (
    SELECT runs.role AS role, count(*) AS n, sum(runs.cost_usd) AS cost
    FROM runs JOIN tasks ON tasks.id = runs.task_id JOIN wanted ON wanted.role = runs.role
    WHERE tasks.project = {project} AND runs.status = 'succeeded'
      AND (wanted.model IS NULL OR runs.model = wanted.model OR runs.usage_model = wanted.model)
    GROUP BY runs.role, runs.task_id
)
SELECT role, sum(n) AS runs, min(cost) AS low, max(cost) AS high FROM per_task GROUP BY role"""


def newest_artifact(columns: str, kind: str, project: str) -> str:
    """SQL: the newest artifact of a kind written for a task of a project, newest first over
    artifacts_by_kind (0020), each checked against its task's project."""
    return f"""
SELECT {columns} FROM artifacts JOIN blobs USING (sha256)
JOIN tasks ON tasks.id = artifacts.task_id
WHERE artifacts.kind = {kind} AND tasks.project = {project} ORDER BY artifacts.id DESC LIMIT 1"""


def tokens_by_task(named: str) -> str:
    """SQL: every token each task's runs reported, of the tasks `named` selects (runs_by_task)."""
    return f"""
SELECT task_id,
    sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS tokens
FROM runs WHERE {named} GROUP BY task_id"""


def cost_groups(requests: str, since: str | None) -> str:
    """SQL: runs summed by role, adapter, model (the one recorded, else the one the usage
    named) and stage; `requests` counts a run's requests (its dialect's JSON array length),
    `since`, when given, is the parameter of the earliest time a run finished (or, not
    finished, was queued) to count it."""
    where = "" if since is None else f"WHERE COALESCE(finished_at, enqueued_at) >= {since}"
    return f"""
SELECT role, NULLIF(adapter, '') AS adapter,
    COALESCE(NULLIF(model, ''), NULLIF(usage_model, '')) AS model, stage,
    count(*) AS runs, sum({requests}) AS requests,
    sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
    sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
    sum(cost_usd) AS usd, min(id) AS first_run
FROM runs {where} GROUP BY 1, 2, 3, 4"""


def costliest_tasks(limit: str) -> str:
    """SQL: the tasks whose runs cost the most, `limit` of them (its parameter); of equal
    cost, the task whose first run came first."""
    return f"""
SELECT task_id, count(*) AS runs, sum(input_tokens + output_tokens) AS tokens,
    sum(cost_usd) AS usd
FROM runs GROUP BY task_id ORDER BY usd DESC, min(id) LIMIT {limit}"""
