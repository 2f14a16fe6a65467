"""A review send-back continues the dev agent's session with the real Claude Code and Codex
against the fake model (`resume: true`): the second dev run's first request carries the first
run's conversation, and the run records which session it continued.

The reviewer is the scripted agent, asking for changes once; every other role is scripted too.
The CLIs keep their sessions in their own HOME (a temporary one per test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.codex import HEADLESS_CONFIG
from core.domain.models import TaskState
from tests.support.real_clis import FIRST, SECOND, assert_offline, need, send_back_loop


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
