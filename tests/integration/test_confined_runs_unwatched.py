"""A run known before it starts to run nothing outside bubblewrap (every profile of its role
confined here; for QA, its checks too) is not watched: no fingerprint of the main checkout is
taken around it, and it is never the "before" another run's undo goes back to, so what the
operator changed while it ran stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.base import CliAdapter
from adapters.sandbox import bwrap_problem
from adapters.scripted import ScriptedSpec
from core.config.schema import load_config
from core.domain.models import Run, RunStatus, TaskState, utcnow
from core.domain.reports import RunReport
from core.worker.outside_changes import confined_ahead, watching
from core.workspace import worktrees as worktrees_module
from core.workspace.worktrees import Worktrees
from tests.support.git import make_task, plain_git
from tests.support.pipeline import write_config
from tests.support.repos import make_repo

S = TaskState


def run_of(task_id: str, stage: TaskState, role: str) -> Run:
    return Run(id=f"R-{task_id}", task_id=task_id, stage=stage, role=role, enqueued_at=utcnow())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", "trunk", {"app.py": "x = 1\n"}, exclude_factory=True)


async def test_an_undo_keeps_what_the_operator_changed_while_a_confined_run_went_on(repo):
    # The planner is confined (`bwrap`: bubblewrap or no run at all); the developer is not.
    roles = {"planner": [{"adapter": "scripted", "sandbox": "bwrap"}]}
    write_config(repo, roles={**roles, "dev": [{"adapter": "scripted", "sandbox": "none"}]})
    config = load_config(repo / "t25.yaml")
    adapters = {"scripted": CliAdapter(ScriptedSpec())}
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    planning, building = (make_task(i).model_copy(update={"project": "shop"}) for i in "12")
    for task in (planning, building):
        await wt.ensure(task)
    hook = repo / ".git" / "hooks" / "post-checkout"

    plan = run_of(planning.id, S.PLAN, "planner")
    async with watching(wt, plan, planning, config, adapters) as confined:
        plain_git("config", "alias.st", "status", cwd=repo)  # the operator's, meanwhile
        build = run_of(building.id, S.IMPLEMENTING, "dev")
        async with watching(wt, build, building, config, adapters) as unconfined:
            hook.write_text("#!/bin/sh\ntouch /tmp/owned\n")
            hook.chmod(0o755)
            undone = await unconfined.finish(RunReport(error="ended before saying what ran"))
        assert undone.changes and ".git/hooks/post-checkout" in undone.put_back
        assert not hook.exists()
        assert plain_git("config", "alias.st", cwd=repo) == "status"  # not put back
        assert (await confined.finish(RunReport())).changes == ()
    assert plain_git("config", "alias.st", cwd=repo) == "status"


@pytest.mark.parametrize(
    "sandbox",
    [
        pytest.param(
            "auto", marks=pytest.mark.skipif(bool(bwrap_problem()), reason="no bubblewrap")
        ),
        "none",
    ],
)
async def test_only_runs_that_may_reach_the_main_checkout_fingerprint_it(env, sandbox, monkeypatch):
    taken: list[str | None] = []
    real = worktrees_module.fingerprint

    async def counted(repo, **kw):
        taken.append(kw.get("branch"))
        return await real(repo, **kw)

    monkeypatch.setattr(worktrees_module, "fingerprint", counted)
    control = await env.open(sandbox=sandbox)
    task = await env.new()
    await env.work()
    task = await env.task(task.id)
    assert task.state is S.DONE, task.error
    runs = await control.store.list_runs(task_id=task.id)
    assert all(r.status is RunStatus.SUCCEEDED for r in runs)
    watched = [r for r in runs if r.stage is not S.PR_OPEN]
    if sandbox == "auto":  # every run known confined before it starts, QA's checks too
        assert taken == [], taken
    else:  # before and after every run of agent code
        assert len(taken) == 2 * len(watched), (taken, [r.stage for r in runs])


@pytest.mark.skipif(bool(bwrap_problem()), reason="no bubblewrap")
@pytest.mark.parametrize(("mode", "qa_confined"), [("auto", True), ("none", False)])
def test_qa_is_known_confined_only_when_its_checks_are_too(repo, mode, qa_confined):
    """Every agent confined (`sandbox: bwrap` on each profile); QA's checks run under the
    project's setting: with `none` they may reach the main checkout, so QA is watched."""
    confined = {"adapter": "scripted", "sandbox": "bwrap"}
    roles = {role: [confined] for role in ("spec", "planner", "dev", "qa", "reviewer", "docs")}
    write_config(repo, roles=roles, sandbox={"mode": mode})
    config = load_config(repo / "t25.yaml")
    adapters = {"scripted": CliAdapter(ScriptedSpec())}
    task = make_task().model_copy(update={"project": "shop"})

    ahead = {
        stage: confined_ahead(run_of(task.id, stage, role), task, config, adapters)
        for stage, role in ((S.PLAN, "planner"), (S.IMPLEMENTING, "dev"), (S.QA, "qa"))
    }

    assert ahead == {S.PLAN: True, S.IMPLEMENTING: True, S.QA: qa_confined}
