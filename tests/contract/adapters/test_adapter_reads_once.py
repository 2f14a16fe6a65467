"""A run's output is read once: the spec's `parse` runs once per run, and each JSON line of a
real CLI's captured output is decoded once, whatever the run's outcome (success, quota,
overload, a plain failure) and however many checks read what it printed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from adapters.aider import AiderSpec
from adapters.base import CliAdapter, CliAdapterSpec, CliOutput
from adapters.claude import ClaudeSpec
from adapters.codex import CodexSpec
from adapters.gemini import GeminiSpec
from adapters.opencode import OpencodeSpec
from adapters.process import ProcessResult
from adapters.scripted import ScriptedSpec
from core.domain.agent import AgentRequest, Failure
from core.domain.models import TaskState
from tests.support.agent_kit import Sink

CAPTURES = Path(__file__).with_name("captures")
# Each real CLI's spec, and the glob that finds what it printed on stdout in its captures.
STDOUT_CAPTURES = {
    ClaudeSpec: "claude/*.stream.jsonl",
    CodexSpec: "codex/*.jsonl",
    GeminiSpec: "gemini/*.stream-json.jsonl",
    OpencodeSpec: "opencode/*.jsonl",
    AiderSpec: "aider/*.stdout.txt",
}
CASES = [
    pytest.param(spec, path, code, id=f"{path.relative_to(CAPTURES)}-exit-{code}")
    for spec, pattern in STDOUT_CAPTURES.items()
    for path in sorted(CAPTURES.glob(pattern))
    for code in (0, 1)
]


class CountsParses(CliAdapterSpec):
    """Put before a spec's class: counts the calls of its `parse` in `parses`."""

    parses = 0

    def parse(self, stdout: str) -> CliOutput:
        self.parses += 1
        return super().parse(stdout)


def counted(spec_type: type[CliAdapterSpec]) -> CountsParses:
    """A `spec_type` that counts its parses."""
    return type(f"Counted{spec_type.__name__}", (CountsParses, spec_type), {})()


def json_objects(text: str) -> list[str]:
    """The lines of `text` a spec decodes as JSON."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith("{")]


def stderr_beside(path: Path) -> str:
    """What the CLI printed on stderr in the same capture, when it was kept."""
    stem = path.name.split(".")[0]
    kept = sorted(path.parent.glob(f"{stem}.stderr*.txt"))
    return kept[0].read_text(encoding="utf-8") if kept else ""


@pytest.fixture
def json_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text `json.loads` decodes while the test runs."""
    seen: list[str] = []
    decode = json.loads

    def counting(text, **options):
        seen.append(text)
        return decode(text, **options)

    monkeypatch.setattr(json, "loads", counting)
    return seen


def request() -> AgentRequest:
    return AgentRequest(
        task_id="T-1",
        run_id="R-1",
        role="dev",
        stage=TaskState.IMPLEMENTING,
        prompt="p",
        cwd=Path("/tmp"),
    )


def test_the_cases_cover_every_real_cli_and_its_failures() -> None:
    assert {spec for spec, *_ in (case.values for case in CASES)} == set(STDOUT_CAPTURES)
    assert len(CASES) > 50


@pytest.mark.parametrize(("spec_type", "path", "code"), CASES)
def test_a_captured_output_is_parsed_once_whatever_the_outcome(
    spec_type: type[CliAdapterSpec], path: Path, code: int, json_decodes: list[str]
) -> None:
    spec = counted(spec_type)
    stdout = path.read_text(encoding="utf-8")
    done = ProcessResult(
        exit_code=code, stdout=stdout.encode(), stderr=stderr_beside(path).encode(), log=b""
    )
    CliAdapter(spec)._result(request(), "x", done)
    assert spec.parses == 1
    assert sorted(json_decodes) == sorted(json_objects(stdout))  # each line decoded once


async def test_a_real_run_that_hits_its_quota_is_parsed_once(make_request, json_decodes):
    spec, sink = counted(ScriptedSpec), Sink()
    result = await CliAdapter(spec, grace_s=0.5).run(
        make_request(args=("--misbehave", "quota")), sink, asyncio.Event()
    )
    assert result.failure is Failure.QUOTA and result.quota_resets_at is not None
    assert spec.parses == 1
    assert sorted(json_decodes) == sorted(json_objects(sink.text()))
