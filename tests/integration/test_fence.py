"""The operator works in the main checkout while agents run, and no run fails for it.

Two tasks' implementations are under way at once (each holds until the test says go); the
operator meanwhile edits a tracked file, runs the project's tests, fetches from a remote and
merges a third task through T25. Confined (bubblewrap: the main checkout is out of the
runs' reach) nothing is asked at all. Unconfined, T25's merge, the fetched refs and the
ignored test cache never count; the edit T25 cannot attribute is asked about on each task
("yours?"), the agents' work kept, and merge waits for the operator's word."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.sandbox import bwrap_problem
from core.domain.models import RunStatus, TaskState
from core.errors import PolicyRefused
from core.workspace.git import git_sync
from tests.support.waiting import until

S = TaskState
GATE = "go"
WAIT_S = 60  # for a run to get under way, at most


async def under_way(tree: Path) -> None:
    """Until the held implementation in `tree` says it is under way (bounded)."""
    await until((tree / f"{GATE}.started").exists, WAIT_S, f"a run under way in {tree}")


def operator_day(shop: Path, remote: Path) -> None:
    """What an operator does in their checkout: edit, test, fetch."""
    code = shop / "app.py"
    code.write_text(code.read_text() + "# a line of the operator's\n")
    tests = [sys.executable, "-m", "pytest", "-q", "test_app.py"]
    subprocess.run(tests, cwd=shop, capture_output=True, timeout=120, check=False)
    assert (shop / ".pytest_cache").is_dir()  # ignored by its own .gitignore
    git_sync("fetch", "-q", str(remote), "+refs/heads/*:refs/remotes/origin/*", cwd=shop)


@pytest.fixture
def remote(shop: Path, tmp_path: Path) -> Path:
    """A clone of the shop with a branch of its own, to fetch from."""
    clone = tmp_path / "remote"
    subprocess.run(["git", "clone", "-q", str(shop), str(clone)], check=True)
    git_sync("branch", "hotfix", cwd=clone)
    return clone


@pytest.mark.parametrize(
    "sandbox",
    [
        pytest.param(
            "auto", marks=pytest.mark.skipif(bool(bwrap_problem()), reason="no bubblewrap")
        ),
        "none",
    ],
)
async def test_the_operators_own_work_fails_no_run(env, shop, remote, sandbox):
    control = await env.open(sandbox=sandbox, limits={"workers": 3})
    first = await env.new(title="Merged meanwhile")
    await env.work()
    assert (await env.task(first.id)).state is S.DONE

    held = [await env.new(title=f"Held {n}", description=f"scripted: wait={GATE}") for n in (1, 2)]
    sweeper = env.sweeper()
    working = asyncio.create_task(sweeper.work())
    trees = [shop / ".factory" / "worktrees" / t.id for t in held]
    try:
        await asyncio.wait_for(asyncio.gather(*(under_way(t) for t in trees)), WAIT_S)
        assert (await control.merge(first.id, actor="ana")).merged
        await asyncio.to_thread(operator_day, shop, remote)
        for tree in trees:
            (tree / GATE).write_text("go\n")
        await asyncio.wait_for(working, 120)
    finally:
        working.cancel()

    git_sync("commit", "-qam", "the operator's line", cwd=shop)
    for task in held:
        task = await env.task(task.id)
        runs = await control.store.list_runs(task_id=task.id)
        assert task.state is S.DONE, task.error
        assert all(r.status is RunStatus.SUCCEEDED for r in runs), [(r.id, r.error) for r in runs]
        assert f"changes/{task.id}.md" in git_sync("show", "--stat", task.branch, cwd=shop)
        if sandbox == "auto":  # out of the runs' reach: nothing of theirs to ask about
            assert task.violation is None, task.violation
            assert (await control.merge(task.id, actor="ana")).merged
            continue
        asked = task.violation or ""
        assert "yours?" in asked and "modified file app.py" in asked, asked
        for not_asked in (".pytest_cache", "refs/remotes", "HEAD moved"):
            assert not_asked not in asked, asked
        with pytest.raises(PolicyRefused, match="until what changed outside its worktree"):
            await control.merge(task.id, actor="ana")
        await control.acknowledge(task.id, actor="ana", reason="the line in app.py is mine")
        assert (await control.merge(task.id, actor="ana")).merged
    assert "# a line of the operator's" in (shop / "app.py").read_text()
    assert git_sync("rev-parse", "refs/remotes/origin/hotfix", cwd=shop)  # never put back
    assert os.path.isdir(shop / ".pytest_cache")
