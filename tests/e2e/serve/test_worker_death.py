"""A worker process that dies costs an attempt only to the runs whose agents it had started.

`t25 run --workers 3` with three runs in flight: one agent running (held at a gate), two runs
claimed and waiting for their worktrees (this test holds their locks, as another process
would). The process is SIGKILLed and started again: once the leases lapse, the run whose
agent was running has used an attempt, the two others have not (store.reaping).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

from core.domain.events import RunStarted
from core.domain.models import RunStatus, TaskState
from core.workspace.task_trees import META_DIR
from core.workspace.worktree_lock import WorktreeLock
from t25_tui.api.server import make_api
from t25_tui.api.worker_client import HttpRunQueue
from tests.support.pipeline import Env, write_config
from tests.support.runs import T25, WAIT_S, runs, start_run, until
from tests.support.serving import CREDENTIAL, serving


def test_only_the_runs_whose_agents_were_running_pay_for_a_killed_worker(shop):
    write_config(shop)
    gate = "go"
    subprocess.run(
        [*T25, "task", "new", "Held", "--description", f"scripted: wait={gate}"],
        cwd=shop,
        check=True,
        capture_output=True,
        timeout=60,
    )
    for title in ("Second", "Third"):
        subprocess.run([*T25, "task", "new", title], cwd=shop, check=True, capture_output=True)
    meta = shop / ".factory" / "worktrees" / META_DIR
    meta.mkdir(parents=True)
    locks = [WorktreeLock(meta / f"{ref}.lock", ref).acquire() for ref in ("T-2", "T-3")]
    started = shop / ".factory" / "worktrees" / "T-1" / f"{gate}.started"
    log = shop.parent / "run.err"
    running = start_run(shop, log)
    try:
        until(started.exists, "the first task's agent at its gate")
        until(
            lambda: sum(r.status is RunStatus.RUNNING for r, _ in runs(shop)) == 3,
            "the two other runs claimed",
        )
        os.kill(running.pid, signal.SIGKILL)
        running.wait(timeout=30)
        for lock in locks:
            lock.release()
        started.unlink()  # the killed agent's; the next attempt's says it is under way again
        running = start_run(shop, log)
        until(started.exists, "the first task's next attempt at its gate")
        started.with_name(gate).write_text("go\n")
        running.wait(timeout=WAIT_S)
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
            running.wait(timeout=10)
    attempts = {(r.task_id, r.stage): (r.attempts, agents, r.status) for r, agents in runs(shop)}
    assert attempts[("T-1", TaskState.IMPLEMENTING)][:2] == (2, [1, 2]), log.read_text()
    for ref in ("T-2", "T-3"):  # claimed twice, their agents started once
        assert attempts[(ref, TaskState.SPEC)][:2] == (1, [1]), log.read_text()
    assert {status for *_, status in attempts.values()} == {RunStatus.SUCCEEDED}, attempts


async def test_a_remote_worker_starts_its_agent_only_once_serve_holds_that_it_does(shop):
    """The fact the reaper reads comes through serve before the agent starts, not after."""
    env = Env(shop)
    control = await env.open()
    try:
        await env.new()
        for _ in range(2):  # RECEIVED to SPEC, then SPEC's run queued
            await env.sweeper().sweep()
        app = make_api(control, worker_credential=CREDENTIAL, operator_token=None)
        async with serving(app) as url:
            remote = HttpRunQueue(url, CREDENTIAL)
            try:
                claim = await remote.claim("remote-1", 30)
                assert claim is not None
                lease = claim.lease
                started = RunStarted(
                    task_id=lease.task_id, run_id=lease.run_id, worker=lease.worker, attempt=1
                )
                await remote.record(lease, started)
                # Read at once, with the loop held: nothing more can reach serve meanwhile.
                assert _started_in(shop / ".factory" / "t25.db") == [(lease.run_id, 1)]
                await remote.release(lease)
            finally:
                await remote.close()
    finally:
        await env.close()


def _started_in(db: Path) -> list[tuple[str, int]]:
    """The `run_started` events in the SQLite store at `db`, read without the event loop."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        rows = con.execute(
            "SELECT run_id, json_extract(payload, '$.attempt') FROM events"
            " WHERE kind = 'run_started'"
        ).fetchall()
    return [(f"R-{run}", attempt) for run, attempt in rows]
