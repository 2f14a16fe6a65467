"""Undoing a run's change outside its worktree: the shared git files come back byte for
byte (and mode), planted refs go, the changed copy is kept; and with runs overlapping, one
run's undo never writes back what another planted, nor is taken for a change of its own."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from core.domain.models import Task, TaskType, utcnow
from core.workspace.worktrees import Worktrees
from tests.support.repos import make_repo


def plain_git(*args: str, cwd: Path) -> str:
    """git as an agent would run it: no T25 hardening."""
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_task(task_id: str) -> Task:
    now = utcnow()
    return Task(
        id=task_id, project="demo", title="t", type=TaskType.FEAT, created_at=now, state_since=now
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", "trunk", {"app.py": "x = 1\n"}, exclude_factory=True)


@pytest.fixture
def wt(repo: Path) -> Worktrees:
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")


async def test_the_shared_files_and_refs_come_back_as_they_were(repo, wt):
    task = make_task("T-1")
    path = await wt.ensure(task)
    git_dir = repo / ".git"
    hook = git_dir / "hooks" / "post-merge"
    hook.write_text("#!/bin/sh\necho the operator's\n")
    hook.chmod(0o755)
    config = (git_dir / "config").read_bytes()
    exclude = (git_dir / "info" / "exclude").read_bytes()
    head = plain_git("rev-parse", "HEAD", cwd=repo)
    plain_git("branch", "side", cwd=repo)
    watched = await wt.watch_run(task)

    plain_git("config", "core.fsmonitor", "touch /tmp/owned", cwd=path)
    hook.write_text("#!/bin/sh\ntouch /tmp/owned\n")
    (git_dir / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    os.rename(git_dir / "info", git_dir / "info-moved")
    os.symlink(git_dir / "info-moved", git_dir / "info")  # info/ now a link elsewhere
    plain_git("tag", "planted", cwd=path)
    (path / "new.txt").write_text("x\n")
    plain_git("add", "new.txt", cwd=path)
    plain_git("commit", "-qm", "on side", cwd=path)
    plain_git("branch", "-f", "side", "HEAD", cwd=path)

    undone = await wt.watch.finish(watched)
    assert ".git/config changed: +core.fsmonitor=touch /tmp/owned" in undone.changes
    assert set(undone.put_back) >= {
        ".git/config",
        ".git/hooks/post-merge",
        ".git/hooks/pre-commit",
        ".git/info",
        ".git/info/exclude",
        "refs/heads/side",
        "refs/tags/planted",
    }
    assert (git_dir / "config").read_bytes() == config
    assert hook.read_text() == "#!/bin/sh\necho the operator's\n"
    assert hook.stat().st_mode & 0o777 == 0o755
    assert not (git_dir / "hooks" / "pre-commit").exists()
    assert not (git_dir / "info").is_symlink()
    assert (git_dir / "info" / "exclude").read_bytes() == exclude
    assert (git_dir / "info-moved" / "exclude").exists()  # what the link led to is left alone
    assert plain_git("rev-parse", "side", cwd=repo) == head
    assert plain_git("tag", cwd=repo) == ""
    copies = json.loads(undone.evidence)["changed_copies"]
    assert "fsmonitor = touch /tmp/owned" in copies[".git/config"]["content"]
    assert copies[".git/hooks/pre-commit"]["content"] == "#!/bin/sh\n"
    assert copies["refs/tags/planted"] == {"ref": head}
    # A clean run after it finds nothing.
    assert (await wt.watch.finish(await wt.watch_run(task))).changes == ()


async def test_a_run_that_started_after_a_plant_never_writes_it_back(repo, wt):
    first, second = make_task("T-1"), make_task("T-2")
    path = await wt.ensure(first)
    await wt.ensure(second)
    config = (repo / ".git" / "config").read_bytes()
    watching_first = await wt.watch_run(first)
    plain_git("config", "core.fsmonitor", "touch /tmp/owned", cwd=path)  # the first run plants
    watching_second = await wt.watch_run(second)  # ... and the second starts with it in place

    assert (await wt.watch.finish(watching_first)).changes
    assert (repo / ".git" / "config").read_bytes() == config
    assert (await wt.watch.finish(watching_second)).changes == ()  # not blamed, no undo
    assert (repo / ".git" / "config").read_bytes() == config


async def test_runs_that_overlap_a_plant_both_answer_for_it_and_it_is_put_back_once(repo, wt):
    first, second = make_task("T-1"), make_task("T-2")
    path = await wt.ensure(first)
    await wt.ensure(second)
    config = (repo / ".git" / "config").read_bytes()
    watching_second = await wt.watch_run(second)
    watching_first = await wt.watch_run(first)
    plain_git("config", "core.hooksPath", "/tmp/evil", cwd=path)

    first_undone = await wt.watch.finish(watching_first)
    assert first_undone.changes == (".git/config changed: +core.hookspath=/tmp/evil",)
    second_undone = await wt.watch.finish(watching_second)
    assert second_undone.changes == first_undone.changes  # which one planted it, none can say
    assert second_undone.put_back == ()  # already put back: nothing left to write
    assert (repo / ".git" / "config").read_bytes() == config


async def test_a_run_that_also_breaks_its_worktree_is_undone_and_the_worktree_reset(repo, wt):
    task = make_task("T-1")
    path = await wt.ensure(task)
    start = plain_git("rev-parse", "HEAD", cwd=path)
    config = (repo / ".git" / "config").read_bytes()
    watched = await wt.watch_run(task, may_commit=True)
    (path / "work.py").write_text("y = 1\n")
    plain_git("add", "work.py", cwd=path)
    plain_git("commit", "-qm", "the agent's own", cwd=path)
    plain_git("switch", "-q", "-c", "elsewhere", cwd=path)
    (path / "untracked.txt").write_text("x\n")
    plain_git("config", "core.fsmonitor", "touch /tmp/owned", cwd=path)
    (path / ".git").unlink()  # and git in the worktree now finds the main checkout's repository

    undone = await wt.watch.finish(watched)  # measured from the repository's side all the same
    assert undone.changes and (repo / ".git" / "config").read_bytes() == config
    await wt.history.reset(task, start)
    assert plain_git("rev-parse", "HEAD", cwd=path) == start
    assert plain_git("branch", "--show-current", cwd=path) == "feat/T-1"
    assert plain_git("rev-parse", "feat/T-1", cwd=repo) == start
    assert plain_git("status", "--porcelain", "--ignored", cwd=path) == ""
    assert await wt.ensure(task) == path  # adopted again, as T25 made it
