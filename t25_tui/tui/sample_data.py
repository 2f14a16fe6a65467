"""Seeded boards for tests, screenshots and the benchmark: the same data every time.

Everything goes through the runtime T25 itself opens (t25_tui.runtime.open_runtime), the
Store API, `ControlPlane.transition` and `decide` (the paths T25 itself uses). Its clock
is a `Timeline` that stands still until the seeding moves it on, one step at a time, so
every time written — events, task and run rows, audit lines — is the same on every run,
and pictures and snapshots do not change. Nothing is rewritten afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from core.control.cost import estimate
from core.control.service import ControlPlane
from core.domain.events import ApprovalRequested, InputRequested, RunOutput
from core.domain.models import (
    ArtifactKind,
    ArtifactMeta,
    NewRun,
    RunOutcome,
    RunStatus,
    Task,
    TaskState,
    TaskType,
    Usage,
)
from core.domain.states import STAGE_ROLE
from core.workspace.git import git_sync

S = TaskState
BASE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STEP_S = 41  # seconds between two steps of the seeding on its timeline
ACTOR = "ana@ops"
CONFIG = """\
projects:
  - name: shop
    repo: .
roles:
  spec: [{adapter: scripted, model: scripted-1}]
  planner: [{adapter: scripted, model: scripted-1}]
  dev: [{adapter: scripted, model: scripted-1}, {adapter: claude, model: claude-sonnet-4-5}]
  qa: [{adapter: scripted, model: scripted-1}]
  reviewer: [{adapter: scripted, model: scripted-2}]
  docs: [{adapter: scripted, model: scripted-1}]
approval:
  require_for_risk: [high]
cost:
  rates:
    scripted-1: {input: 3.0, output: 15.0}
    scripted-2: {input: 1.0, output: 5.0}
"""
PATH_TO_DONE = [S.SPEC, S.PLAN, S.IMPLEMENTING, S.QA, S.REVIEW, S.PR_OPEN, S.DOCS, S.DONE]
PLAN_FILES = ["app/session.py", "app/keys.py", "tests/test_session.py"]
PLAN = {
    "steps": [
        "Add a key ring with the current and the previous key",
        "Sign new sessions with the current key; accept both when verifying",
        "Add a rotate command and a test for sessions signed before rotation",
    ],
    "files": PLAN_FILES,
    "risk": "high",
    "rationale": "Touches authentication: a mistake logs every user out or accepts forged "
    "sessions.",
}


class Timeline:
    """The seeded board's clock: it stands still until the seeding moves it on (`step`)."""

    def __init__(self, start: datetime = BASE) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def step(self, seconds: float = STEP_S) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Seeded:
    """A control plane over a seeded repository, and the frozen time to show it at.

    t25_tui.runtime.open_sample opens one (a runtime on a fresh `Timeline`, `seed` run
    on it); `close` closes that runtime."""

    control: ControlPlane
    now: datetime
    repo: Path
    close: Callable[[], Awaitable[None]] = field(repr=False)

    def clock(self) -> datetime:
        return self.now


def write_sample(repo: Path, *, make_repo: bool = True) -> Path:
    """The sample repository (unless `make_repo` is False: it exists) with the seeded
    board's t25.yaml; the path of that file."""
    if make_repo:
        repo.mkdir(parents=True, exist_ok=True)
        make_sample_repo(repo)
        (repo / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (repo / "t25.yaml").write_text(CONFIG)
    (repo / ".factory").mkdir(exist_ok=True)
    return repo / "t25.yaml"


def _step(f: ControlPlane, seconds: float = STEP_S) -> None:
    """Move a seeded board's timeline on; a control plane on the machine's clock needs not."""
    if isinstance(f.clock, Timeline):
        f.clock.step(seconds)


async def run_stage(
    f: ControlPlane,
    task: Task,
    *,
    tokens: int = 1800,
    output: str = "",
    status: RunStatus = RunStatus.SUCCEEDED,
    finish: bool = True,
    model: str = "scripted-1",
) -> None:
    """One run of the task's current stage, through the lease queue as a worker does it:
    queued, started two seconds later, finished after a while that depends on its id."""
    _step(f)
    run, event = await f.store.enqueue_run(
        NewRun(task_id=task.id, stage=task.state, role=STAGE_ROLE[task.state])
    )
    f.bus.publish(event)
    _step(f, 2)
    lease = await f.store.claim_run("seed-w1", 600)
    if lease is None or lease.run_id != run.id:
        raise AssertionError(f"the seeding expected to lease {run.id}, not {lease}")
    for line in output.splitlines(keepends=True):
        await f.record(RunOutput(task_id=task.id, run_id=run.id, stream="stdout", text=line))
    if finish:
        _step(f, 9 + (int(run.id.removeprefix("R-")) * 7) % 31)
        usage = Usage(input_tokens=tokens, output_tokens=tokens // 3, model=model)
        cost = estimate(usage, f.config.rate_for(model))
        await f.store.complete_run(
            lease,
            RunOutcome(
                status=status,
                exit_code=0 if status is RunStatus.SUCCEEDED else 1,
                adapter="scripted",
                cli_version="t25-scripted-agent 0.1.0",
                model=model,
                usage=usage,
                requests=_requests(usage),
                cost_usd=cost,
                error=None if status is RunStatus.SUCCEEDED else "exit 1: the agent gave up",
            ),
        )


async def artifact(
    f: ControlPlane, task: Task, kind: ArtifactKind, content: str, media: str
) -> None:
    runs = await f.store.list_runs(task_id=task.id)
    run = runs[-1] if runs else None
    await f.store.put_artifact(
        content.encode(),
        ArtifactMeta(
            kind=kind,
            media_type=media,
            task_id=task.id,
            run_id=run.id if run else None,
            role=run.role if run else None,
            adapter="scripted",
            cli_version="t25-scripted-agent 0.1.0",
            model="scripted-1",
        ),
    )


async def walk(f: ControlPlane, task: Task, until: TaskState, **stage_kw: Any) -> Task:
    """Move a task along the happy path to `until`, one finished run per working stage."""
    for stage in PATH_TO_DONE:
        if task.state is until:
            return task
        if task.state in STAGE_ROLE:
            await run_stage(f, task, **stage_kw)
            await _stage_artifacts(f, task)
        _step(f)
        task = await f.transition(task, stage, actor="t25", reason=_why(task.state, stage))
    return task


def _why(old: TaskState, new: TaskState) -> str:
    return {
        S.SPEC: "picked up",
        S.PLAN: "spec parsed",
        S.IMPLEMENTING: "low-risk plan",
        S.QA: "diff within limits",
        S.REVIEW: "checks passed",
        S.PR_OPEN: "review approved",
        S.DOCS: "local branch is the review unit",
        S.DONE: "docs written",
    }.get(new, "")


async def _stage_artifacts(f: ControlPlane, task: Task) -> None:
    j = "application/json"
    match task.state:
        case S.SPEC:
            await artifact(
                f,
                task,
                ArtifactKind.SPEC,
                json.dumps(
                    {
                        "summary": f"{task.title}.",
                        "acceptance_criteria": [
                            "the behaviour is covered by a unit test",
                            "existing tests still pass",
                        ],
                    }
                ),
                j,
            )
        case S.PLAN:
            await artifact(
                f,
                task,
                ArtifactKind.PLAN,
                json.dumps(
                    {
                        "steps": ["change app.py", "add a test"],
                        "files": ["app.py", "test_app.py"],
                        "risk": "low",
                        "rationale": "small, covered by tests",
                    }
                ),
                j,
            )
        case S.IMPLEMENTING:
            await artifact(
                f,
                task,
                ArtifactKind.DIFF,
                (
                    f"diff --git a/changes/{task.id}.md b/changes/{task.id}.md\nnew file mode 100644\n"
                    f"--- /dev/null\n+++ b/changes/{task.id}.md\n@@ -0,0 +1 @@\n+{task.title}\n"
                ),
                "text/x-diff",
            )
        case S.QA:
            await artifact(
                f,
                task,
                ArtifactKind.QA_REPORT,
                json.dumps({"summary": "unit tests pass", "concerns": []}),
                j,
            )
        case S.REVIEW:
            await artifact(
                f,
                task,
                ArtifactKind.REVIEW,
                json.dumps(
                    {
                        "findings": [
                            {
                                "severity": "minor",
                                "message": "name the constant",
                                "file": "app.py",
                                "line": 2,
                            }
                        ],
                        "summary": "fine",
                    }
                ),
                j,
            )


async def seed(f: ControlPlane) -> datetime:
    """The demo board, on a control plane whose clock is a `Timeline`: a task in almost
    every column, each kind of human decision. The time to show it at."""

    async def new(title: str, **kw: Any) -> Task:
        _step(f)
        return await f.new_task(title, **kw)

    t1 = await new("Add a greeting endpoint", actor=ACTOR)
    t1 = await walk(f, t1, S.DONE)
    wt = f.worktrees(t1.project)
    path = await wt.ensure(t1)
    (path / "changes").mkdir(exist_ok=True)
    (path / "changes" / f"{t1.id}.md").write_text("Add a greeting endpoint\n")
    await wt.history.commit_all(t1, f"{t1.id}: {t1.title}")

    t2 = await new(
        "Rotate the session signing key", actor=ACTOR, description="Touches authentication."
    )
    t2 = await walk(f, t2, S.PLAN)
    for attempt in (1, 2):
        await run_stage(f, t2, tokens=2400)
        await artifact(f, t2, ArtifactKind.PLAN, json.dumps(PLAN), "application/json")
        _step(f)
        t2 = await f.transition(
            t2, S.AWAITING_APPROVAL, actor="t25", reason="high-risk plan needs a human"
        )
        await f.record(
            ApprovalRequested(task_id=t2.id, plan_sha256="0" * 64, risk="high", files=PLAN_FILES)
        )
        if attempt == 1:
            _step(f, 7 * 60)  # a person reads the plan
            t2 = await f.reject(t2.id, actor=ACTOR, reason="keep the previous key for 24 h")
            await f.store.cancel_runs(t2.id)

    t3 = await new(
        "Validate the page size",
        actor=ACTOR,
        type=TaskType.FIX,
        description="Reject sizes over 100.",
    )
    t3 = await walk(f, t3, S.REVIEW)
    _step(f)
    t3 = await f.update(t3, actor="t25", review_loops=1)
    await run_stage(
        f,
        t3,
        finish=False,
        output="".join(f"reviewer: reading app.py hunk {i}\n" for i in range(1, 9)),
    )

    t4 = await new("Pick the invoice currency", actor=ACTOR)
    t4 = await walk(f, t4, S.SPEC)
    await run_stage(f, t4)
    _step(f)
    t4 = await f.transition(
        t4, S.NEEDS_INPUT, actor="t25", reason="EUR or the customer's currency?"
    )
    await f.record(
        InputRequested(
            task_id=t4.id,
            stage=S.SPEC,
            question="Invoice in EUR, or in the customer's currency?",
        )
    )

    t5 = await new("Upgrade the YAML parser", actor=ACTOR, type=TaskType.CHORE)
    t5 = await walk(f, t5, S.IMPLEMENTING)
    await run_stage(f, t5, status=RunStatus.FAILED)
    _step(f)
    await f.transition(
        t5,
        S.FAILED,
        actor="t25",
        reason="IMPLEMENTING run failed: exit 1",
        error="IMPLEMENTING run R-?: exit 1: the agent gave up",
    )

    t6 = await new("Drop the legacy CSV export", actor=ACTOR, type=TaskType.REFACTOR)
    t6 = await walk(f, t6, S.PLAN)
    _step(f, 7 * 60)
    await f.cancel(t6.id, actor=ACTOR, reason="customers still use it")

    t7 = await new("Document the rate limits", actor=ACTOR, type=TaskType.DOCS)
    t7 = await walk(f, t7, S.SPEC)
    t8 = await new("Cache product listings", actor=ACTOR)
    t8 = await walk(f, t8, S.QA)
    await run_stage(f, t8)
    _step(f)
    t8 = await f.transition(t8, S.IMPLEMENTING, actor="t25", reason="unit tests failed", qa_loops=1)
    # It waits for T-1, done but not merged yet: the board marks it blocked.
    await new("Fix the flaky checkout test", actor=ACTOR, type=TaskType.FIX, after=[t1.id])
    t10 = await new("Show prices with tax", actor=ACTOR)
    await walk(f, t10, S.PR_OPEN, model="scripted-2")
    _step(f, 15 * STEP_S)  # the board is looked at a little after the last change
    return f.clock()


def make_sample_repo(repo: Path) -> None:
    """The sample service the demo and the seeded data work on: one commit on `trunk`."""
    git_sync("init", "--quiet", "--initial-branch", "trunk", cwd=repo)
    for key, value in (("user.name", "T25 Demo"), ("user.email", "demo@t25.invalid")):
        git_sync("config", key, value, cwd=repo)
    (repo / "app.py").write_text('def greet(name):\n    return f"hello, {name}"\n')
    (repo / "test_app.py").write_text(
        "import unittest\n\nimport app\n\n\nclass GreetTest(unittest.TestCase):\n"
        "    def test_greet(self):\n        self.assertEqual(app.greet('ana'), 'hello, ana')\n"
    )
    (repo / "README.md").write_text("# shop\n\nA small sample service.\n")
    git_sync("add", "-A", cwd=repo)
    git_sync("commit", "--quiet", "-m", "Initial commit", cwd=repo)


def _requests(usage: Usage) -> tuple[Usage, ...]:
    """A run's tokens as three model requests would report them: the same fixed part sent
    each turn, the answer in the last."""
    sent = usage.input_tokens // 3
    first = Usage(input_tokens=sent, output_tokens=0, model=usage.model)
    last = Usage(
        input_tokens=usage.input_tokens - 2 * sent,
        output_tokens=usage.output_tokens,
        model=usage.model,
    )
    return (first, first, last)
