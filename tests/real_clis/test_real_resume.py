"""A review send-back continues the dev agent's session with the real Claude Code and Codex
against the fake model (`resume: true`): the second dev run's first request carries the first
run's conversation, and the run records which session it continued.

The reviewer is the scripted agent, asking for changes once; every other role is scripted too.
The CLIs keep their sessions in their own HOME (a temporary one per test)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.base import CliAdapter
from adapters.checks import run_check
from adapters.codex import HEADLESS_CONFIG
from adapters.registry import builtin_adapters
from adapters.scripted import ScriptedSpec
from core.config.schema import load_config
from core.control.service import ControlPlane
from core.domain.models import Run, Task, TaskState
from store import open_store
from t25_tui.runtime import local_sweeper
from tests.fakemodel.server import FakeModel
from tests.real_clis.conftest import need, profile
from tests.real_clis.test_real_clis import RATES, assert_offline
from tests.test_pipeline import write_config

FIRST, SECOND = "T25-ROUND: 1", "T25-ROUND: 2"


@dataclass
class SendBack:
    """A task through a review send-back: its dev runs, and the model requests of each."""

    task: Task
    dev: list[Run]
    first: list[dict]  # the requests of the first dev run
    second: list[dict]  # ... and of the dev run the review sent the task back to

    @staticmethod
    def size(requests: list[dict]) -> int:
        """Bytes sent to the model: each request's JSON body."""
        return sum(len(json.dumps(r["body"]).encode()) for r in requests)


async def send_back_loop(cli: str, fake: FakeModel, repo: Path, *, resume: bool) -> SendBack:
    """One task with `cli` as the dev agent, sent back once by review."""
    dev = {**profile(cli, fake), "private_home": False, "sandbox": "none", "resume": resume}
    write_config(repo, roles={"dev": [dev]}, cost={"rates": RATES})
    config = load_config(repo / "t25.yaml")
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        await control.sync_projects()
        adapters = {**builtin_adapters(), "scripted": CliAdapter(ScriptedSpec())}
        sweeper = local_sweeper(control, adapters, run_check, heartbeat_s=0.5)
        task = await control.new_task(
            "Add a greeting file", actor="ana", description="scripted: review=changes-once"
        )
        await asyncio.wait_for(sweeper.work(), 300)
        task = await control.task(task.id)
        runs = [r for r in await store.list_runs(task_id=task.id) if r.role == "dev"]
    finally:
        await store.close()
    asked = [r for r in fake.requests if r.get("api")]
    return SendBack(
        task,
        runs,
        [
            r
            for r in asked
            if FIRST in json.dumps(r["body"]) and SECOND not in json.dumps(r["body"])
        ],
        [r for r in asked if SECOND in json.dumps(r["body"])],
    )


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """The CLI's own HOME, where it keeps its sessions: this test's, holding the headless
    Codex settings a user of T25 keeps (no plugins, which reach for github.com)."""
    path = tmp_path / "home"
    (path / ".codex").mkdir(parents=True)
    (path / ".codex" / "config.toml").write_text(HEADLESS_CONFIG)
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return path


@pytest.mark.parametrize("cli", ["claude", "codex"])
async def test_a_review_send_back_continues_the_dev_agents_session(cli, fake, shop, home):
    need(cli)
    loop = await send_back_loop(cli, fake, shop, resume=True)
    assert loop.task.state is TaskState.DONE, loop.task.error
    first, second = loop.dev
    assert first.session_id and first.resumed_session is None
    assert second.resumed_session == first.session_id, second.adapter_reason
    assert second.session_id == first.session_id  # the same conversation went on
    assert loop.first and loop.second
    carried = json.dumps(loop.second[0]["body"])
    assert FIRST in carried  # the first run's prompt, in the second run's first request
    assert "The change needs another round." in carried  # and the review's finding
    assert "## Plan" in json.dumps(loop.first[0]["body"])
    new = carried.split(SECOND, 1)[1]
    assert "## Plan" not in new  # what is new carries no plan again
    assert_offline(cli, fake)


@pytest.mark.parametrize("cli", ["claude", "codex"])
async def test_without_resume_the_send_back_starts_cold(cli, fake, shop, home):
    need(cli)
    loop = await send_back_loop(cli, fake, shop, resume=False)
    assert loop.task.state is TaskState.DONE, loop.task.error
    first, second = loop.dev
    assert second.resumed_session is None and second.session_id != first.session_id
    assert loop.second and FIRST not in json.dumps(loop.second[0]["body"])
