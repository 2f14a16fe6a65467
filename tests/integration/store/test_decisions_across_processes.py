"""Two real processes deciding on the same tasks at once, on every store backend: each
decision is either cleanly refused, or applied with exactly one audit line and one
DecisionRecorded event; and on Postgres, deciders on other checkouts take turns too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import Counter
from pathlib import Path

import asyncpg
import pytest
import yaml

from core.config.schema import load_config
from core.control.audit import AuditLog
from core.control.service import ControlPlane
from core.domain.events import DecisionRecorded
from tests.support import CHECKOUT
from tests.support.backends import Backend, PostgresBackend
from tests.support.repos import make_repo
from tests.support.waiting import until

ROOT = CHECKOUT
TASKS = 150  # two processes × cancel and archive × 150 tasks: 600 decisions


async def _decider(config: Path, actor: str, tasks: list[str]) -> asyncio.subprocess.Process:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.decider",
        str(config),
        actor,
        *tasks,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert await asyncio.wait_for(child.stdout.readline(), 60) == b"ready\n"
    return child


async def test_two_processes_deciding_at_once_apply_each_decision_once(
    backend: Backend, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", exclude_factory=True)
    (repo / "t25.yaml").write_text(
        yaml.safe_dump({"projects": [{"name": "shop", "repo": "."}], "store": {"url": backend.url}})
    )
    config = load_config(repo / "t25.yaml")
    store = await backend.open()
    try:
        control = ControlPlane(config, store)
        await control.sync_projects()
        tasks = [(await control.new_task(f"task {n}", actor="ana")).id for n in range(TASKS)]

        children = [await _decider(repo / "t25.yaml", actor, tasks) for actor in ("ana", "bo")]
        for child in children:
            child.stdin.write(b"go\n")
            await child.stdin.drain()
            child.stdin.close()
        outputs = [await asyncio.wait_for(child.communicate(), 600) for child in children]
        assert [child.returncode for child in children] == [0, 0]
        outcomes = [o for out, _ in outputs for o in json.loads(out)]

        assert len(outcomes) == 4 * TASKS
        failed = [o for o in outcomes if o["outcome"] not in ("applied", "refused")]
        assert failed == []
        applied = Counter(
            (o["task"], o["verb"], o["actor"]) for o in outcomes if o["outcome"] == "applied"
        )
        assert sorted((task, verb) for task, verb, _ in applied) == sorted(
            (task, verb) for task in tasks for verb in ("cancel", "archive")
        )

        audit = AuditLog(repo / ".factory" / "audit.jsonl", store)
        lines = Counter((e.task, e.decision, e.actor) for e in audit.entries())
        assert lines == applied  # no line for a refused decision, none voided
        verdict = await audit.verify()
        assert verdict.ok and verdict.lines == 2 * TASKS, verdict.message
        events = Counter(
            (e.task_id, e.decision, e.actor)
            for e in await store.events_after(0, limit=100_000)
            if isinstance(e, DecisionRecorded)
        )
        assert events == applied
        for task in tasks:
            assert (await control.task(task)).archived
    finally:
        await store.close()


# Advisory locks of this database (the server holds other tests' databases too).
_ADVISORY = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = $1"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


@pytest.mark.postgres
async def test_deciders_on_two_checkouts_sharing_postgres_take_turns(pg_template: str) -> None:
    backend = PostgresBackend(pg_template)
    await backend.create()
    first, second = await backend.open(), await backend.open()
    watcher = await asyncpg.connect(backend.url)
    waiting: asyncio.Task | None = None
    try:
        release = await first.lock_audit()
        try:
            waiting = asyncio.create_task(second.lock_audit())
            await until(
                lambda: watcher.fetchval(_ADVISORY, False),
                timeout=100,  # below the lock's own 120 s wait, which would end it
                what="the second checkout waiting for the audit lock",
            )
            assert not waiting.done()
        finally:
            await release()  # else closing the first store would wait for its connection
        release_second = await asyncio.wait_for(waiting, 120)
        try:
            assert await watcher.fetchval(_ADVISORY, True) == 1
        finally:
            await release_second()
    finally:
        if waiting is not None and not waiting.done():
            waiting.cancel()
            with contextlib.suppress(BaseException):
                await waiting
        await watcher.close()
        await first.close()
        await second.close()
        await backend.drop()
