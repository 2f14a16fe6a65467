"""Seeded factories for tests, screenshots and the benchmark: the same data every time.

Everything goes through the Store API and `ControlPlane.transition` (the paths T25 itself
uses); a final pass pins every timestamp to a fixed timeline so that pictures and
snapshots do not change from one run to the next. The audit log is written by the real
ControlPlane decisions with its clock pinned for the same reason.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import core.control.audit
from core.config.schema import load_config
from core.control.service import STAGE_ROLE, ControlPlane
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
from core.workspace.git import git_sync

S = TaskState
BASE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STEP_S = 41  # seconds between consecutive events on the pinned timeline
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
PLAN = {
    "steps": [
        "Add a key ring with the current and the previous key",
        "Sign new sessions with the current key; accept both when verifying",
        "Add a rotate command and a test for sessions signed before rotation",
    ],
    "files": ["app/session.py", "app/keys.py", "tests/test_session.py"],
    "risk": "high",
    "rationale": "Touches authentication: a mistake logs every user out or accepts forged "
    "sessions.",
}


@dataclass
class Seeded:
    """A factory over a seeded repository, and the frozen time to show it at."""

    control: ControlPlane
    now: datetime
    repo: Path

    def clock(self) -> datetime:
        return self.now


@contextmanager
def _pinned_audit_clock() -> Iterator[None]:
    ticks = iter(range(1, 10_000))
    real = core.control.audit.utcnow
    core.control.audit.utcnow = lambda: BASE + timedelta(minutes=7 * next(ticks))  # type: ignore[assignment]
    try:
        yield
    finally:
        core.control.audit.utcnow = real  # type: ignore[assignment]


async def open_seeded(repo: Path, *, make_repo: bool = True) -> ControlPlane:
    from store import open_store

    if make_repo:
        repo.mkdir(parents=True, exist_ok=True)
        make_sample_repo(repo)
        (repo / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (repo / "t25.yaml").write_text(CONFIG)
    (repo / ".factory").mkdir(exist_ok=True)
    config = load_config(repo / "t25.yaml")
    control = ControlPlane(config, await open_store(config.store_url))
    await control.sync_projects()
    return control


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
    """One run of the task's current stage, through the lease queue as a worker does it."""
    run, event = await f.store.enqueue_run(
        NewRun(task_id=task.id, stage=task.state, role=STAGE_ROLE[task.state])
    )
    f.bus.publish(event)
    lease = await f.store.claim_run("seed-w1", 600)
    assert lease is not None and lease.run_id == run.id
    for line in output.splitlines(keepends=True):
        await f.record(RunOutput(task_id=task.id, run_id=run.id, stream="stdout", text=line))
    if finish:
        usage = Usage(input_tokens=tokens, output_tokens=tokens // 3, model=model)
        rate = f.config.rate_for(model)
        cost = (usage.input_tokens * rate.input + usage.output_tokens * rate.output) / 1e6
        await f.store.complete_run(
            lease,
            RunOutcome(
                status=status,
                exit_code=0 if status is RunStatus.SUCCEEDED else 1,
                adapter="scripted",
                cli_version="t25-scripted-agent 0.1.0",
                model=model,
                usage=usage,
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


async def walk(f: ControlPlane, task: Task, until: TaskState, **stage_kw) -> Task:
    """Move a task along the happy path to `until`, one finished run per working stage."""
    for stage in PATH_TO_DONE:
        if task.state is until:
            return task
        if task.state in STAGE_ROLE:
            await run_stage(f, task, **stage_kw)
            await _stage_artifacts(f, task)
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


async def seed(repo: Path) -> Seeded:
    """The demo board: a task in almost every column, each kind of human decision."""
    f = await open_seeded(repo)
    new = f.new_task
    with _pinned_audit_clock():
        t1 = await new("Add a greeting endpoint", actor=ACTOR)
        t1 = await walk(f, t1, S.DONE)
        wt = f.worktrees(t1.project)
        path = await wt.ensure(t1)
        (path / "changes").mkdir(exist_ok=True)
        (path / "changes" / f"{t1.id}.md").write_text("Add a greeting endpoint\n")
        await wt.commit_all(t1, f"{t1.id}: {t1.title}")

        t2 = await new(
            "Rotate the session signing key", actor=ACTOR, description="Touches authentication."
        )
        t2 = await walk(f, t2, S.PLAN)
        for attempt in (1, 2):
            await run_stage(f, t2, tokens=2400)
            await artifact(f, t2, ArtifactKind.PLAN, json.dumps(PLAN), "application/json")
            t2 = await f.transition(
                t2, S.AWAITING_APPROVAL, actor="t25", reason="high-risk plan needs a human"
            )
            await f.record(
                ApprovalRequested(
                    task_id=t2.id, plan_sha256="0" * 64, risk="high", files=PLAN["files"]
                )
            )
            if attempt == 1:
                t2 = await f.reject(t2.id, actor=ACTOR, reason="keep the previous key for 24 h")
                await f.store.cancel_runs(t2.id)

        t3 = await new(
            "Validate the page size",
            actor=ACTOR,
            type=TaskType.FIX,
            description="Reject sizes over 100.",
        )
        t3 = await walk(f, t3, S.REVIEW)
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
        await f.transition(
            t5,
            S.FAILED,
            actor="t25",
            reason="IMPLEMENTING run failed: exit 1",
            error="IMPLEMENTING run R-?: exit 1: the agent gave up",
        )

        t6 = await new("Drop the legacy CSV export", actor=ACTOR, type=TaskType.REFACTOR)
        t6 = await walk(f, t6, S.PLAN)
        await f.cancel(t6.id, actor=ACTOR, reason="customers still use it")

        t7 = await new("Document the rate limits", actor=ACTOR, type=TaskType.DOCS)
        t7 = await walk(f, t7, S.SPEC)
        t8 = await new("Cache product listings", actor=ACTOR)
        t8 = await walk(f, t8, S.QA)
        await run_stage(f, t8)
        t8 = await f.transition(
            t8, S.IMPLEMENTING, actor="t25", reason="unit tests failed", qa_loops=1
        )
        await new("Fix the flaky checkout test", actor=ACTOR, type=TaskType.FIX)
        t10 = await new("Show prices with tax", actor=ACTOR)
        await walk(f, t10, S.PR_OPEN, model="scripted-2")
    now = pin_times(f)
    return Seeded(f, now, repo)


def pin_times(f: ControlPlane) -> datetime:
    """Rewrite every timestamp onto a fixed timeline (event n at BASE + n·STEP_S)."""
    path = f.store.url.removeprefix("sqlite:///")
    base = BASE.timestamp()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET at = ? + id * ?", (base, STEP_S))
        db.execute("""UPDATE tasks SET
            created_at = (SELECT min(at) FROM events e WHERE e.task_id = tasks.id),
            state_since = coalesce((SELECT max(at) FROM events e WHERE e.task_id = tasks.id
                AND e.kind IN ('task_created', 'task_transitioned')), created_at)""")
        db.execute("""UPDATE runs SET
            enqueued_at = (SELECT min(at) FROM events e WHERE e.run_id = runs.id),
            not_before = (SELECT min(at) FROM events e WHERE e.run_id = runs.id)""")
        db.execute("UPDATE runs SET started_at = enqueued_at + 2 WHERE started_at IS NOT NULL")
        db.execute("""UPDATE runs SET finished_at = started_at + 9 + (id * 7) % 31
                      WHERE finished_at IS NOT NULL""")
        db.execute(
            "UPDATE runs SET lease_expires_at = ? WHERE lease_expires_at IS NOT NULL",
            (base + 10 * 86400,),
        )
        last = db.execute("SELECT max(id) FROM events").fetchone()[0] or 0
    return BASE + timedelta(seconds=(last + 15) * STEP_S)


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
