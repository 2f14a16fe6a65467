"""Adapter fixtures: the scripted agent, the echo CLI, and requests in a fresh directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_kit import EchoSpec, prompt_for

from adapters.base import CliAdapter
from adapters.scripted import ScriptedSpec
from core.domain.agent import AgentRequest
from core.domain.models import TaskState


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def make_request(workdir: Path) -> Callable[..., AgentRequest]:
    def make(
        stage: str = "PLAN",
        body: str = "",
        *,
        prompt: str | None = None,
        args: tuple[str, ...] = (),
        round_: int = 1,
        **fields,
    ) -> AgentRequest:
        fields.setdefault("cwd", workdir)
        fields.setdefault("log_dir", workdir.parent / "run-logs")  # never the worktree
        return AgentRequest(
            task_id="T-7",
            run_id="R-1",
            role="dev",
            stage=TaskState(stage),
            prompt=prompt if prompt is not None else prompt_for(stage, body, round_=round_),
            args=args,
            **fields,
        )

    return make


@pytest.fixture
def scripted() -> CliAdapter:
    adapter = CliAdapter(ScriptedSpec(), grace_s=0.5)
    assert adapter.locate(), "t25-scripted-agent is not installed: pip install -e '.[test]'"
    return adapter


@pytest.fixture
def echo() -> CliAdapter:
    return CliAdapter(EchoSpec(), grace_s=0.5)
