"""A QA check that cannot start - its program missing, the sandbox refusing it - is an
environment error: QA waits for the operator without sending the change back to dev, and
the merge is refused naming the program. Real processes, bubblewrap, the scripted agents."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from adapters.checks import run_check
from adapters.sandbox import bwrap_problem
from core.config.policy_config import QACheck
from core.config.schema import Limits
from core.domain.agent import CheckSandbox, RunCaps
from core.domain.events import InputRequested
from core.domain.models import ArtifactKind, RunStatus, TaskState
from core.errors import MergeRefused
from tests.support.pipeline import trunk_log

S = TaskState
MISSING = "no-such-tool-t25"
NOT_FOUND = (
    f"QA check 'lint' could not start: program '{MISSING}' not found "
    "(environment error; the change was not sent back to dev)"
)

bwrap = pytest.mark.skipif(
    bool(bwrap_problem()) and os.environ.get("T25_REQUIRE_PG") != "1",
    reason=f"bubblewrap cannot run here: {bwrap_problem()}",
)
CAPS = RunCaps.of(Limits())
# Each way a check reaches its program: unconfined, under the caps launcher, in bubblewrap,
# and in bubblewrap behind the network bridge.
WAYS = [
    pytest.param(CheckSandbox(kind="none"), id="none"),
    pytest.param(CheckSandbox(kind="none", caps=CAPS), id="none-capped"),
    pytest.param(CheckSandbox(kind="required", caps=CAPS), id="bwrap", marks=bwrap),
    pytest.param(CheckSandbox(kind="required", network="allowlist"), id="bwrap-net", marks=bwrap),
]


@pytest.mark.parametrize("confine", WAYS)
async def test_a_missing_program_is_named_as_a_start_error(tmp_path, confine):
    lint = QACheck(name="lint", run=[MISSING, "check"])
    done = await run_check(lint, tmp_path, asyncio.Event(), confine)
    assert not done.passed and done.start_error == f"program '{MISSING}' not found"

    script = tmp_path / "lint.sh"
    script.write_text("#!/bin/sh\necho linted\n")  # not executable
    denied = await run_check(QACheck(name="lint", run=["./lint.sh"]), tmp_path, None, confine)
    assert denied.start_error == "program './lint.sh' may not be run (permission denied)"


@pytest.mark.parametrize("confine", WAYS)
async def test_a_program_that_ran_and_failed_is_no_start_error(tmp_path, confine):
    said = "t25: cannot start ruff: No such file or directory"  # printed, then exit 1
    for run in (
        [sys.executable, "-c", f"import sys; print({said!r}); sys.exit(1)"],
        [sys.executable, "-c", "import sys; print('E501 line too long'); sys.exit(127)"],
        ["false"],
    ):
        done = await run_check(QACheck(name="lint", run=run), tmp_path, None, confine)
        assert not done.passed and done.start_error is None, done


@bwrap
async def test_qa_waits_for_the_operator_and_their_answer_runs_it_again(env, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    lint = {"name": "lint", "run": [str(tools / MISSING), "check"]}
    unit = {"name": "unit", "run": [sys.executable, "-m", "unittest", "-q"]}
    control = await env.open(
        qa={"checks": [lint, unit]}, sandbox={"mode": "required", "read_paths": [str(tools)]}
    )
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.NEEDS_INPUT, task.error
    assert task.qa_loops == 0  # no loop spent, the change never went back to dev
    assert await env.history(task.id) == [S.SPEC, S.PLAN, S.IMPLEMENTING, S.QA, S.NEEDS_INPUT]
    events = await control.store.events_after(0, task_id=task.id, limit=10_000)
    asked = next(e for e in events if isinstance(e, InputRequested))
    program = tools / MISSING
    assert asked.question.startswith(NOT_FOUND.replace(MISSING, str(program), 1))
    assert "`sandbox.read_paths`" in asked.question
    assert f"`t25 answer {task.id} …` runs QA again" in asked.question
    runs = await control.store.list_runs(task_id=task.id)
    qa = [r for r in runs if r.stage is S.QA]
    assert len(qa) == 1 and qa[0].status is RunStatus.FAILED and qa[0].adapter is None  # no agent
    kinds = [a.meta.kind for a in await control.store.list_artifacts(task_id=task.id)]
    assert ArtifactKind.QA_REPORT in kinds

    program.write_text("#!/bin/sh\necho clean\n")  # the operator installs the tool
    program.chmod(0o755)
    await control.answer(task.id, "installed the linter", actor="ana")
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE and task.checks_passed, task.error
    assert task.qa_loops == 0
    assert (await env.history(task.id)).count(S.IMPLEMENTING) == 1


@bwrap
async def test_the_merge_is_refused_naming_the_program_not_the_change(env):
    control = await env.open(qa={"checks": []})
    task = await env.new()
    await env.work()
    assert (await env.task(task.id)).state is S.DONE
    await env.close()
    before = trunk_log(env.repo)
    control = await env.open(
        qa={"checks": [{"name": "lint", "run": [MISSING, "check"]}]}, sandbox="required"
    )
    with pytest.raises(MergeRefused) as refused:
        await control.merge(task.id, actor="ana")
    said = refused.value.message
    assert f"QA check 'lint' could not start: program '{MISSING}' not found" in said
    assert "an environment error, not the change's" in said and "fails the required" not in said
    assert refused.value.hint and "then merge again" in refused.value.hint
    assert trunk_log(env.repo) == before and not (await env.task(task.id)).merged
    assert not Path(env.repo / ".factory" / "worktrees" / ".merge" / task.id).exists()
