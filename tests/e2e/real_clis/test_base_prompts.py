"""Codex and Gemini CLI open every request with T25's short base prompt for the role
(adapters.base_prompt) in place of their own, and every role still does its stage.

A whole task goes through the pipeline with the CLI playing every role against the fake
model and ends DONE, the dev run's file committed; every request it sent carried, as its
system prompt (Codex: its developer turn; Gemini CLI: `systemInstruction`), exactly the base
prompt of the run's tool set, and a tenth of the CLI's own at most, measured in the same
test with a run of its defaults (`tools: cli`): 21-22 KB on Codex 0.171.0 and Gemini CLI
0.61.0 against T25's 0.4-0.6 KB.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from adapters.base import CliAdapter
from adapters.base_prompt import base_prompt_file
from adapters.checks import run_check
from adapters.registry import builtin_specs
from core.config.schema import load_config
from core.control.service import ControlPlane
from core.domain.models import TaskState
from core.domain.tools import role_tools
from core.workspace.git import git_sync
from store import open_store
from t25_tui.runtime import local_sweeper
from tests.support.fakemodel.parts import parts
from tests.support.fakemodel.server import FakeModel
from tests.support.pipeline import ROLES, write_config
from tests.support.real_clis import EVERY_STAGE, RATES, need, profile, run_cli

CLIS = ("codex", "gemini")

# Which run a request belongs to, by the first words of its stage's prompt from T25; every
# other stage reads and searches only.
WRITERS = {"You are the developer for task": "dev", "You are the documentation writer": "docs"}


def system_text(cli: str, body: dict) -> str:
    """The system prompt a request carried: Codex's instructions and developer turns, or
    Gemini CLI's systemInstruction."""
    if cli == "codex":
        turns = [t for t in body.get("input", []) if t.get("role") == "developer"]
        texts = [c.get("text", "") for t in turns for c in t.get("content", [])]
        return "\n".join([body.get("instructions") or "", *texts]).strip()
    return "\n".join(p.get("text", "") for p in body["systemInstruction"]["parts"]).strip()


def role_of(body: dict) -> str:
    said = json.dumps(body)
    return next((role for words, role in WRITERS.items() if words in said), "reviewer")


async def whole_task(cli: str, fake: FakeModel, repo: Path) -> TaskState:
    """One task through the pipeline with `cli` in every role, each with its own tool set."""
    fake.final = EVERY_STAGE
    entry = profile(cli, fake)
    write_config(
        repo,
        roles={role: [entry] for role in ROLES},
        cost={"rates": RATES},
        policies={"reviewer_differs_from_author": "off"},
        limits={"workers": 1, "run_timeout_s": 120},
    )
    config = load_config(repo / "t25.yaml")
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        await control.sync_projects()
        spec = next(s for s in builtin_specs() if s.name == cli)
        sweeper = local_sweeper(control, {cli: CliAdapter(spec)}, run_check, heartbeat_s=0.5)
        task = await control.new_task("Add a greeting file", actor="ana")
        await asyncio.wait_for(sweeper.work(), 600)
        task = await control.task(task.id)
        assert task.state is TaskState.DONE, task.error
        worktree = repo / ".factory" / "worktrees" / task.id
        assert (worktree / "greeting.txt").read_text() == "hello from the agent\n"
        return task.state
    finally:
        await store.close()


async def defaults_system_bytes(cli: str, fake: FakeModel, where: Path) -> int:
    """The system prompt of a dev run with the CLI's own defaults (`tools: cli`), in bytes."""
    start = len(fake.requests)
    where.mkdir()
    git_sync("init", "-q", cwd=where)
    result = await run_cli(cli, fake, where, "dev", None)
    assert result.ok, result.error
    return max(parts(r).system for r in fake.requests[start:] if r["api"])


@pytest.mark.parametrize("cli", CLIS)
async def test_every_role_sends_t25s_base_prompt_and_does_its_stage(cli, fake, shop, tmp_path):
    need(cli)
    own = await defaults_system_bytes(cli, fake, tmp_path / "defaults")
    start = len(fake.requests)
    await whole_task(cli, fake, shop)
    served = [r for r in fake.requests[start:] if r["api"]]
    seen = set()
    for request in served:
        role = role_of(request["body"])
        seen.add(role)
        wanted = base_prompt_file(role_tools(role)).read_text(encoding="utf-8").strip()
        assert system_text(cli, request["body"]) == wanted, (cli, role)
        assert parts(request).system <= own / 10, (cli, role, parts(request), own)
    assert seen == {"dev", "docs", "reviewer"}, seen
