"""The scripted agent: every stage's answer parses, it really edits its worktree, and its
directives and misbehaviours do what the pipeline tests rely on."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from adapters.registry import builtin_adapters
from adapters.scripted_agent import ESCAPE_FILE, changes_file
from core.domain.answers import (
    DevAnswer,
    DocsAnswer,
    PlanAnswer,
    QAAnswer,
    ReviewAnswer,
    SpecAnswer,
    extract_json,
    parse_answer,
)
from core.domain.models import TaskState
from core.workspace.git import git_sync
from tests.support import CHECKOUT
from tests.support.agent_kit import Sink

STAGES = {
    "SPEC": SpecAnswer,
    "PLAN": PlanAnswer,
    "IMPLEMENTING": DevAnswer,
    "QA": QAAnswer,
    "REVIEW": ReviewAnswer,
    "DOCS": DocsAnswer,
}


async def answer(adapter, request):
    result = await adapter.run(request, Sink(), asyncio.Event())
    assert result.ok, result.error
    return parse_answer(request.stage, result.final_text)


@pytest.mark.parametrize("stage", STAGES)
async def test_every_stage_answer_parses(scripted, make_request, stage):
    assert isinstance(await answer(scripted, make_request(stage)), STAGES[stage])


async def test_plan_risk_comes_from_the_directive(scripted, make_request):
    assert (await answer(scripted, make_request("PLAN"))).risk == "low"
    high = await answer(scripted, make_request("PLAN", "Rate-limit logins.\nscripted: risk=high"))
    assert high.risk == "high" and high.files == [changes_file("T-7")]


async def test_implementing_really_changes_the_worktree(scripted, make_request, repo):
    dev = await answer(scripted, make_request("IMPLEMENTING", round_=2, cwd=repo))
    assert dev.files_changed == [changes_file("T-7")]
    assert (repo / changes_file("T-7")).read_text() == "- T-7 round 2: scripted change\n"
    assert (
        git_sync("status", "--porcelain", "-uall", cwd=repo).strip() == f"?? {changes_file('T-7')}"
    )


@pytest.mark.parametrize(
    "how",
    [{"body": "scripted: review=changes-once"}, {"args": ("--misbehave", "review-changes-once")}],
)
async def test_review_asks_for_changes_once(scripted, make_request, how):
    first = await answer(
        scripted, make_request("REVIEW", how.get("body", ""), round_=1, args=how.get("args", ()))
    )
    assert [f.severity for f in first.findings] == ["major"]
    assert first.verdict == "APPROVE"  # the model's word, which T25 ignores
    second = await answer(
        scripted, make_request("REVIEW", how.get("body", ""), round_=2, args=how.get("args", ()))
    )
    assert second.findings == []


async def test_a_question_directive_asks_until_answered(scripted, make_request):
    body = "Add a limit.\nscripted: question=What is the limit?"
    result = await scripted.run(make_request("SPEC", body), Sink(), asyncio.Event())
    assert extract_json(result.final_text) == {"question": "What is the limit?"}
    answered = await answer(
        scripted, make_request("SPEC", body + "\n\n## Operator answers\n10/min")
    )
    assert isinstance(answered, SpecAnswer) and answered.question is None


async def test_escape_writes_into_the_main_checkout(scripted, make_request, repo, tmp_path):
    worktree = tmp_path / "worktrees" / "T-7"
    git_sync("worktree", "add", "--quiet", "-b", "feat/T-7", str(worktree), cwd=repo)
    result = await scripted.run(
        make_request("QA", cwd=worktree, args=("--misbehave", "escape")), Sink(), asyncio.Event()
    )
    assert result.ok
    assert (repo / ESCAPE_FILE).is_file()
    assert not (worktree / ESCAPE_FILE).exists()
    assert str(repo / ESCAPE_FILE) in result.files_changed
    parse_answer(TaskState.QA, result.final_text)  # and it still answered normally


def agent(*args: str) -> subprocess.CompletedProcess:
    binary = builtin_adapters()["scripted"].locate()
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60
    )


def test_version_and_usage_errors():
    assert agent("--version").stdout.strip() == "t25-scripted-agent 0.1.0"
    missing = agent()
    assert missing.returncode == 2 and "-p PROMPT" in missing.stderr
    unknown = agent("-p", "T25-STAGE: QA", "--misbehave", "dance")
    assert unknown.returncode == 2 and "unknown misbehaviour 'dance'" in unknown.stderr
    bad = agent("-p", "T25-STAGE: QA", "--misbehave", "exit:soon")
    assert bad.returncode == 2 and "needs a number" in bad.stderr


def test_a_prompt_that_looks_like_options_is_a_value():
    done = agent("-p", "--version\nT25-STAGE: DOCS")
    assert done.returncode == 0 and '"is_error": false' in done.stdout


def test_the_agent_imports_neither_pydantic_nor_t25():
    code = (
        "import sys, adapters.scripted_agent; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'core', 'store', 't25_tui', 'textual')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=CHECKOUT,
    )
    assert done.stdout.strip() == "[]"


def test_the_registry_offers_the_scripted_agent():
    adapters = builtin_adapters()
    assert set(adapters) == {"claude", "codex", "gemini", "opencode", "aider", "scripted"}
    assert adapters["scripted"].name == "scripted" and adapters["scripted"].locate()


def paced_bytes(task: str, what: str) -> int:
    done = agent("-p", f"T25-STAGE: QA\nT25-TASK: {task}", "--misbehave", what)
    assert done.returncode == 0 and '"is_error": false' in done.stdout
    events = [json.loads(line) for line in done.stdout.splitlines()]
    filler = [e for e in events if e["type"] == "assistant" and not e["text"].strip(".")]
    return sum(len(json.dumps(e)) + 1 for e in filler)


def test_pace_streams_its_rate_for_a_time_drawn_from_the_task():
    """pace:MIN-MAX:KBPS prints KBPS kB for each second drawn in MIN-MAX; the draw is seeded by
    the task, stage and round, so a run is the same again (bench/fleet.py relies on it)."""
    first = paced_bytes("T-7", "pace:0.1-0.3:100")
    assert 10_000 - 100 <= first <= 30_000
    assert paced_bytes("T-7", "pace:0.1-0.3:100") == first
    assert paced_bytes("T-8", "pace:0.1-0.3:100") != first
    backwards = agent("-p", "T25-STAGE: QA", "--misbehave", "pace:2-1:20")
    assert backwards.returncode == 2 and "MIN <= MAX" in backwards.stderr
