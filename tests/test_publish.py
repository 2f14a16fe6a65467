"""PR_OPEN: push and open a pull request when there is a remote and `gh`, else the local
branch is the review unit. A real bare repository plays the remote; `gh` is the one
stand-in (there is no GitHub here): a script that records how it was called."""

from __future__ import annotations

import json
import os
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.domain.models import Task, TaskType
from core.errors import T25Error
from core.workspace.git import git_sync
from core.workspace.pull_request import publish
from core.workspace.worktrees import Worktrees
from tests.conftest import make_repo

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def branch(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    worktrees = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="test")
    task = Task(
        id="T-4",
        project="p",
        title="Add a greeting",
        type=TaskType.FEAT,
        description="Say hello",
        created_at=NOW,
        state_since=NOW,
    )
    path = await worktrees.ensure(task)
    (path / "hello.txt").write_text("hello\n")
    await worktrees.commit_all(task, "T-4: Add a greeting")
    return repo, worktrees, task


async def test_without_a_remote_the_local_branch_is_the_review_unit(branch):
    _repo, worktrees, task = branch
    note = await publish(worktrees, task)
    assert note == "branch feat/T-4 is the review unit (no git remote 'origin'): 1 file, +1 -0"


async def test_with_a_remote_and_gh_it_pushes_and_opens_a_pull_request(
    branch, tmp_path, monkeypatch
):
    repo, worktrees, task = branch
    origin = tmp_path / "origin.git"
    git_sync("init", "--bare", "--quiet", str(origin), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    calls = tmp_path / "gh-calls.json"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'cwd': os.getcwd()}}, open({str(calls)!r}, 'w'))\n"
        "print('https://github.invalid/shop/pull/7')\n"
    )
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    note = await publish(worktrees, task)
    assert note == "pushed feat/T-4 to origin and opened https://github.invalid/shop/pull/7"
    pushed = git_sync("rev-parse", "refs/heads/feat/T-4", cwd=origin)
    assert pushed == git_sync("rev-parse", "feat/T-4", cwd=repo)
    call = json.loads(calls.read_text())
    assert call["argv"] == [
        "pr",
        "create",
        "--head",
        "feat/T-4",
        "--base",
        "trunk",
        "--title",
        "Add a greeting (T-4)",
        "--body",
        "Say hello",
    ]
    assert Path(call["cwd"]) == worktrees.path_for("T-4")


async def test_a_failed_push_says_why(branch, tmp_path, monkeypatch):
    repo, worktrees, task = branch
    git_sync("remote", "add", "origin", str(tmp_path / "missing.git"), cwd=repo)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "gh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(T25Error, match="git push failed"):
        await publish(worktrees, task)
