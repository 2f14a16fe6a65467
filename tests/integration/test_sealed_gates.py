"""The merge gate decides on T25's own sealed records, not on the task's row: an agent that can
write the store (a Postgres with trust authentication, the SQLite file) sets its task DONE with
checks passed and a review approved, and `t25 merge` refuses it and `t25 audit verify` names
it; a forged transition, with a seal T25 never made, is named the same way. Through the real
binary, on both stores."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from core.control.history import merge_blocker, replay
from core.control.keyring import KEY_FILE, Keyring
from core.domain.events import TaskTransitioned
from core.domain.models import TaskState
from store import open_store
from tests.support.backends import PostgresBackend
from tests.support.pipeline import ROLES, SCRIPTED, Env
from tests.support.waiting import until

CMD = [sys.executable, "-m", "t25_tui"]
FORGED_ROW = (
    "UPDATE tasks SET state = 'DONE', checks_passed = {true}, review_verdict = 'approve', "
    "reviewed_head = NULL WHERE id = 1"
)


def t25(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CMD, *args], cwd=repo, capture_output=True, text=True, timeout=180, check=False
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_url(request, shop):
    """The store's URL, and a way to write it as an agent would, straight in SQL."""
    if request.param == "sqlite":
        db = shop / ".factory" / "t25.db"

        async def write(sql: str) -> None:
            with sqlite3.connect(db) as con:
                con.execute(sql.format(true=1))

        yield f"sqlite:///{db}", write
        return
    backend = PostgresBackend(request.getfixturevalue("pg_template"))
    await backend.create()

    async def write_pg(sql: str) -> None:
        import asyncpg

        con = await asyncpg.connect(backend.url)
        try:
            await con.execute(sql.format(true="true"))
        finally:
            await con.close()

    try:
        yield backend.url, write_pg
    finally:
        await backend.drop()


async def _implementing(shop: Path, url: str) -> None:
    """A task whose dev stage is done and whose QA waits: no check ran, no review."""
    roles = {role: [SCRIPTED] for role in ROLES}
    roles["qa"] = [{"adapter": "scripted", "args": ["--misbehave", "hang"]}]
    env = Env(shop)
    control = await env.open(roles=roles, store={"url": url})
    try:
        task = await env.new()
        # Worked until it reaches QA; then the workers stop (QA's agent never ends).
        working = asyncio.create_task(env.sweeper().work())
        try:
            await until(_in_qa(control, task.id), timeout=120, what="the task in QA")
        finally:
            working.cancel()
            await asyncio.gather(working, return_exceptions=True)
    finally:
        await env.close()


def _in_qa(control, ref: str):
    async def check() -> bool:
        return (await control.task(ref)).state is TaskState.QA

    return check


async def test_a_row_set_done_by_someone_else_is_refused_and_named(shop, store_url):
    url, write = store_url
    await _implementing(shop, url)
    await write(FORGED_ROW)  # what an agent with the store's password (or none) does

    listed = json.loads(t25(shop, "task", "show", "T-1", "--json").stdout)
    assert listed["task"]["state"] == "DONE"  # the row says so ...
    merged = t25(shop, "merge", "T-1")
    assert merged.returncode != 0, merged.stdout
    assert "cannot be merged" in merged.stderr
    assert "row says DONE, its sealed history QA" in merged.stderr, merged.stderr
    assert "t25 recheck T-1" in merged.stderr
    verified = t25(shop, "audit", "verify")
    assert verified.returncode == 1, verified.stdout
    assert "MISMATCH: T-1: its row says DONE, its sealed history QA" in verified.stderr
    dry = t25(shop, "merge", "T-1", "--dry-run")
    assert "row says DONE" in dry.stdout + dry.stderr


async def test_a_transition_sealed_by_anyone_but_t25_is_named(shop, store_url):
    url, write = store_url
    await _implementing(shop, url)
    forged = TaskTransitioned(
        task_id="T-1",
        from_state=TaskState.QA,
        to_state=TaskState.DONE,
        actor="t25",
        facts={"checks_passed": True, "review_verdict": "approve", "reviewed_head": "0" * 40},
        seal="0badc0de:" + "0" * 64,
    )
    store = await open_store(url)  # what anyone who can write the store can do
    try:
        await store.append_event(forged)
    finally:
        await store.close()
    await write(FORGED_ROW.replace("reviewed_head = NULL", f"reviewed_head = '{'0' * 40}'"))
    merged = t25(shop, "merge", "T-1")
    assert merged.returncode != 0 and "a record T25 did not write" in merged.stderr, merged.stderr
    assert "sealed by key 0badc0de" in merged.stderr
    verified = t25(shop, "audit", "verify")
    assert verified.returncode == 1 and "T-1" in verified.stderr, verified.stderr


def test_checks_on_one_head_and_a_review_of_another_do_not_merge(tmp_path):
    keys = Keyring.open(tmp_path / KEY_FILE)

    def sealed(n: int, src: TaskState, dst: TaskState, facts: dict) -> TaskTransitioned:
        from core.control.history import transition_seal

        seal = transition_seal(keys, "T-1", src, dst, facts)
        return TaskTransitioned(
            id=n, task_id="T-1", from_state=src, to_state=dst, actor="t25", facts=facts, seal=seal
        )

    events = [
        sealed(
            1, TaskState.QA, TaskState.REVIEW, {"checks_passed": True, "checked_head": "a" * 40}
        ),
        sealed(
            2,
            TaskState.REVIEW,
            TaskState.PR_OPEN,
            {"review_verdict": "approve", "reviewed_head": "b" * 40},
        ),
        sealed(3, TaskState.PR_OPEN, TaskState.DOCS, {}),
        sealed(4, TaskState.DOCS, TaskState.DONE, {}),
    ]
    from core.domain.models import Task

    task = Task(
        id="T-1",
        project="shop",
        title="t",
        type="feat",
        created_at="2026-01-01T00:00:00Z",
        state_since="2026-01-01T00:00:00Z",
        state=TaskState.DONE,
        checks_passed=True,
        review_verdict="approve",
        reviewed_head="b" * 40,
    )
    said = merge_blocker(task, replay("T-1", events, keys))
    assert said is not None and "checks ran on aaaaaaaaaaaa, not on the head the review" in said
    facts = dict(events[0].facts, checked_head="b" * 40)
    events[0] = sealed(1, TaskState.QA, TaskState.REVIEW, facts)
    assert merge_blocker(task, replay("T-1", events, keys)) is None
    unbound = task.model_copy(update={"reviewed_head": None})
    assert "row says reviewed_head None" in (
        merge_blocker(unbound, replay("T-1", events, keys)) or ""
    )


def test_a_rotated_key_seals_from_then_on_and_the_old_still_verifies(repo):
    (repo / "t25.yaml").write_text("projects:\n  - name: app\n")
    for n in range(2):
        assert t25(repo, "task", "new", f"task {n}").returncode == 0
    assert t25(repo, "cancel", "T-1").returncode == 0
    first = Keyring.open(repo / KEY_FILE).keys[-1].id
    rotated = t25(repo, "audit", "rotate-key")
    assert rotated.returncode == 0 and "it seals from now on" in rotated.stdout
    newer = Keyring.open(repo / KEY_FILE).keys[-1].id
    assert newer != first
    assert t25(repo, "cancel", "T-2").returncode == 0
    lines = [
        json.loads(line) for line in (repo / ".factory" / "audit.jsonl").read_text().splitlines()
    ]
    assert [line["mac"].split(":")[0] for line in lines] == [first, newer]
    verified = t25(repo, "audit", "verify")
    assert verified.returncode == 0, verified.stderr
