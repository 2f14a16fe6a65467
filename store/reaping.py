"""Which lapsed leases cost their run an attempt: the SQL both stores reap with.

A lease lapses when its worker stops heartbeating: the worker process died, froze, or
lost the store. Each worker slot (one name, `host:pid-wN`) works one run at a time, and
T25's worker records `RunStarted`, with the attempt's number, just before it starts the
run's agent (through its run queue: in-process, or through serve for a remote worker).
So when a lease lapses, the last agent its slot started belongs to that run if and only
if the run has a `RunStarted` of its current attempt: its agent was running, or had
ended, when the worker went. That run's attempt counts, since its agent may be what
brought the worker down. A run reaped before its agent started - queued behind a
worktree lock, in T25's own work on the stage (QA's checks, a push, a merge) - is a
neighbour of whatever did, and goes back to the queue with its attempt given back.

One bound: a reap is free only when the reap before it on the same run was not. A run
whose own stage work kills its worker before any agent starts still fails, after at
most twice its attempts, instead of going round for ever.
"""

from __future__ import annotations

FREE = "lease expired before its agent started"  # how a reap that was free begins


def counts(attempt_of_event: str) -> str:
    """SQL, true when the reaped run (`runs`) uses up its attempt: its agent started in
    it (`attempt_of_event` reads the attempt of a `run_started` row of `events`), or its
    last reap was free already."""
    return f"""(EXISTS (
        SELECT 1 FROM events WHERE events.task_id = runs.task_id AND events.run_id = runs.id
            AND events.kind = 'run_started' AND {attempt_of_event} = runs.attempts
    ) OR coalesce(runs.error, '') LIKE '{FREE}%')"""


def free_error(attempts: str) -> str:
    """SQL: the error a free reap leaves on its run (`attempts` the attempt it had)."""
    return f"'{FREE} (attempt ' || {attempts} || ', not counted)'"
