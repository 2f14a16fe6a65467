"""Helpers for the adapter tests: real child processes only.

`echo_cli.py` reports the argv, environment and prompt it received, which is how the tests see
what the generic adapter really hands a CLI. Helpers that wait do so on conditions, never on
the clock alone.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.base import CliAdapter, CliAdapterSpec, CliOutput
from adapters.prompt_files import PromptArg
from adapters.scripted import ScriptedSpec
from core.domain.agent import AgentRequest
from core.domain.models import TaskState, Usage
from tests.support.waiting import until

ECHO_CLI = Path(__file__).with_name("echo_cli.py")


class EchoSpec(CliAdapterSpec):
    """A spec for echo_cli.py, run by this Python."""

    name = "echo"
    binary = "echo_cli.py"
    extra = {"ECHO_CLI_HOME": "/nonexistent/echo-home"}

    def locate(self) -> str | None:
        return sys.executable

    def build_argv(self, request: AgentRequest, prompt: PromptArg) -> list[str]:
        if prompt.path:
            return [str(ECHO_CLI), "--prompt-file", str(prompt.path)]
        return [str(ECHO_CLI), "-p", prompt.text or ""]

    def parse(self, stdout: str) -> CliOutput:
        lines = stdout.strip().splitlines()
        return CliOutput(final_text=lines[-1] if lines else "", usage=Usage(model="echo-1"))

    def extra_env(self, request: AgentRequest) -> dict[str, str]:
        return dict(self.extra)


class Sink:
    """An OutputSink that keeps everything it is sent, per stream."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, str]] = []

    async def __call__(self, stream: str, text: str) -> None:
        self.chunks.append((stream, text))

    def text(self, stream: str = "stdout") -> str:
        return "".join(text for name, text in self.chunks if name == stream)

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.text().splitlines() if line.startswith("{")]


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie awaiting its reaper is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def eventually(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    """Wait until `condition()` holds; fail the test if it never does."""
    await until(condition, timeout, f"{condition}")


def prompt_for(
    stage: str, body: str = "", *, task: str = "T-7", round_: int = 1, role: str = "dev"
) -> str:
    """A prompt with the header lines T25 puts atop every prompt."""
    return (
        f"T25-STAGE: {stage}\nT25-ROLE: {role}\nT25-TASK: {task}\nT25-ROUND: {round_}\n\n{body}\n"
    )


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
