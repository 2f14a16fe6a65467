"""The audit chain across real processes: deciders SIGKILLed at random points leave a chain
that verifies, or names exactly the one decision that did not take effect; and on Postgres,
two `t25 serve`s on two checkouts and a `t25` command line deciding at once extend one chain
that every checkout verifies and either serve shows whole."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from core.config.schema import load_config
from core.control.audit import VOID, AuditLog, cross_check
from core.control.service import ControlPlane
from core.domain.events import DecisionRecorded
from core.domain.models import TaskState
from core.ports import Store
from tests.conftest import make_repo
from tests.store.conftest import Backend

ROOT = Path(__file__).resolve().parents[2]
KILLS = 100  # decisions killed at random points
SEED = 25  # the points are random, and the same on every run


def _checkout(path: Path, url: str) -> Path:
    repo = make_repo(path, exclude_factory=True)
    (repo / "t25.yaml").write_text(
        yaml.safe_dump({"projects": [{"name": "shop", "repo": "."}], "store": {"url": url}})
    )
    return repo


class Killer:
    """The forking decider (tests/store/forking_decider.py), driven line by line."""

    def __init__(self, config: Path) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-m", "tests.store.forking_decider", str(config)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def decide(self, task: str, kill_after: float | None) -> tuple[int, float]:
        """Cancel `task` in a fresh child, SIGKILLed after `kill_after` seconds (None: let it
        finish); the child's exit status and how long it lived."""
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write(task + "\n")
        self.child.stdin.flush()
        pid = int(self.child.stdout.readline().split()[1])
        if kill_after is not None:
            time.sleep(kill_after)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it finished first
        _, status, took = self.child.stdout.readline().split()
        return int(status), float(took)

    def close(self) -> None:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.close()
        self.child.wait(timeout=30)
        self.child.stdout.close()


async def _findings(audit: AuditLog, store: Store) -> tuple[bool, list[str], str]:
    """verify's verdict (ok, message) and the cross-check's problems, as `t25 audit verify`."""
    verdict = await audit.verify()
    if not verdict.ok:
        return False, [], verdict.message
    recorded: list[DecisionRecorded] = []
    after = 0
    for _ in range(1000):  # a read ends at an id a killed transaction took: read on past it
        events = await store.events_after(after)
        if not events:
            break
        recorded += [e for e in events if isinstance(e, DecisionRecorded)]
        after = events[-1].id or after
    return True, cross_check(await audit.page(), recorded), verdict.message


@pytest.fixture
async def killed_on(backend: Backend, tmp_path: Path) -> AsyncIterator[tuple[Path, Store]]:
    repo = _checkout(tmp_path / "repo", backend.url)
    store = await backend.open()
    yield repo, store
    await store.close()


async def test_a_decider_killed_at_random_points_leaves_nothing_or_the_one_decision(killed_on):
    repo, store = killed_on
    control = ControlPlane(load_config(repo / "t25.yaml"), store)
    await control.sync_projects()
    tasks = [(await control.new_task(f"task {n}", actor="ana")).id for n in range(KILLS + 2)]
    killer = Killer(repo / "t25.yaml")
    pick = random.Random(SEED)
    unapplied: set[int] = set()  # the lines verify named as never anchored
    try:
        status, took = await asyncio.to_thread(killer.decide, tasks[0], None)
        assert status == 0
        began = time.monotonic()
        for task in tasks[1 : KILLS + 1]:
            assert time.monotonic() - began < 300, "a hundred kills take minutes at most"
            await asyncio.to_thread(killer.decide, task, pick.uniform(0.3 * took, 1.1 * took))
            ok, problems, message = await _findings(AuditLog(control.audit.path, store), store)
            if ok:
                assert problems == [], problems  # nothing, or ...
                continue
            # ... exactly one decision that did not take effect: its line, never anchored (this
            # decider's, or an earlier one's that no decider has come to void yet)
            (line,) = [e for e in control.audit.entries() if message == _never_anchored(e.seq)]
            assert line.decision == "cancel" and line.actor == "killer", message
            assert (await control.task(line.task or "")).state is TaskState.RECEIVED
            unapplied.add(line.seq)
        status, _ = await asyncio.to_thread(killer.decide, tasks[-1], None)
        assert status == 0
    finally:
        await asyncio.to_thread(killer.close)

    ok, problems, message = await _findings(AuditLog(control.audit.path, store), store)
    assert ok and problems == [], (message, problems)
    entries = await control.audit.page()
    voided = {e.voids for e in entries if e.decision == VOID}
    took_effect = {e.task for e in entries if e.decision == "cancel" and e.seq not in voided}
    cancelled = {t.id for t in await control.tasks() if t.state is TaskState.CANCELLED}
    assert took_effect == cancelled
    # Every decision verify named is voided now (with any other a killed decider left behind
    # it, which verify names in turn as it reaches them); nothing else is.
    undone = {e.seq for e in entries if e.decision == "cancel" and e.seq in voided}
    assert unapplied <= undone
    assert {e.task for e in entries if e.seq in undone}.isdisjoint(cancelled)
    print(f"{KILLS} kills: {len(cancelled) - 2} applied, {len(undone)} did not take effect")


def _never_anchored(seq: int) -> str:
    return (
        f"line {seq}: was never anchored in the store (appended outside T25, or written by a "
        "process that stopped before acknowledging it)"
    )
