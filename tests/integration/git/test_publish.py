"""PR_OPEN: push and open a pull request when there is a remote and `gh`, else the local
branch is the review unit. A real bare repository plays the remote; `gh` is the one
stand-in (there is no GitHub here): a script that records how it was called."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.domain.models import Task, TaskType
from core.errors import PublishFailed, T25Error
from core.workspace.git import git_sync
from core.workspace.pull_request import publish, push_default_branch
from core.workspace.worktrees import Worktrees
from tests.support.repos import make_repo

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def started(repo: Path) -> Worktrees:
    """The worktrees as T25 makes them when it starts: reading the push settings then."""
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="test")


@pytest.fixture
async def branch(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    worktrees = started(repo)
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
    await worktrees.history.commit_all(task, "T-4: Add a greeting")
    return repo, worktrees, task


async def test_without_a_remote_the_local_branch_is_the_review_unit(branch):
    _repo, worktrees, task = branch
    note = await publish(worktrees, task)
    assert note == "branch feat/T-4 is the review unit (no git remote 'origin'): 1 file, +1 -0"


async def test_with_a_remote_and_no_gh_it_pushes_with_plain_git(branch, tmp_path, monkeypatch):
    repo, _, task = branch
    origin = tmp_path / "origin.git"
    git_sync("init", "--bare", "--quiet", str(origin), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    git_only = tmp_path / "git-only"
    git_only.mkdir()
    (git_only / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(git_only))  # no `gh` anywhere on it
    note = await publish(started(repo), task)
    assert note.startswith("pushed feat/T-4 to origin; no pull request opened (`gh` is not ")
    pushed = git_sync("rev-parse", "refs/heads/feat/T-4", cwd=origin)
    assert pushed == git_sync("rev-parse", "feat/T-4", cwd=repo)


async def test_the_default_branch_a_merge_moved_is_pushed_and_a_refused_push_is_said(
    branch, tmp_path
):
    repo, _, _ = branch
    assert await push_default_branch(started(repo)) == "no git remote 'origin' to push trunk to"
    origin = tmp_path / "origin.git"
    git_sync("init", "--bare", "--quiet", str(origin), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    assert await push_default_branch(started(repo)) == "pushed trunk to origin"
    assert git_sync("rev-parse", "trunk", cwd=origin) == git_sync("rev-parse", "trunk", cwd=repo)
    git_sync("commit", "--allow-empty", "-q", "-m", "elsewhere", cwd=repo)
    git_sync("push", "-q", "origin", "trunk", cwd=repo)
    git_sync("reset", "-q", "--hard", "HEAD~1", cwd=repo)
    git_sync("commit", "--allow-empty", "-q", "-m", "here", cwd=repo)  # diverged: not a ff
    said = await push_default_branch(started(repo))
    assert said.startswith("trunk was not pushed to origin: git push failed")


async def test_with_a_remote_and_gh_it_pushes_and_opens_a_pull_request(
    branch, tmp_path, monkeypatch
):
    repo, _, task = branch
    origin = tmp_path / "origin.git"
    git_sync("init", "--bare", "--quiet", str(origin), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    worktrees = started(repo)
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
    repo, _, task = branch
    git_sync("remote", "add", "origin", str(tmp_path / "missing.git"), cwd=repo)
    worktrees = started(repo)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "gh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(T25Error, match="git push failed"):
        await publish(worktrees, task)


def fake_gh(bin_dir: Path) -> None:
    """A `gh` that, like the real one, runs git in the worktree before it answers."""
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(
        "#!/bin/sh\ngit status --porcelain >/dev/null\necho https://github.invalid/pr/9\n"
    )
    gh.chmod(0o755)


async def test_the_push_goes_where_the_operator_configured_whatever_is_planted_later(
    branch, tmp_path, monkeypatch
):
    repo, _, task = branch
    origin, decoy = tmp_path / "origin.git", tmp_path / "decoy.git"
    for bare in (origin, decoy):
        git_sync("init", "--bare", "--quiet", str(bare), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    worktrees = started(repo)
    fake_gh(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    # Planted after T25 started (by a straggler of an earlier run, say): each one would run
    # a program or send the push elsewhere.
    marker = tmp_path / "planted-ran"
    for key, value in (
        ("remote.origin.pushurl", str(decoy)),
        ("remote.origin.receivepack", f"touch {marker}; git-receive-pack"),
        ("core.fsmonitor", f"touch {marker}; false"),
    ):
        git_sync("config", key, value, cwd=repo)

    note = await publish(worktrees, task)
    assert note == "pushed feat/T-4 to origin and opened https://github.invalid/pr/9"
    assert git_sync("rev-parse", "refs/heads/feat/T-4", cwd=origin) == git_sync(
        "rev-parse", "feat/T-4", cwd=repo
    )
    assert git_sync("for-each-ref", cwd=decoy) == ""
    assert not marker.exists()


async def test_a_push_is_refused_when_what_else_it_reads_changed_since_t25_started(
    branch, tmp_path, monkeypatch
):
    repo, _, task = branch
    origin = tmp_path / "origin.git"
    git_sync("init", "--bare", "--quiet", str(origin), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    worktrees = started(repo)
    fake_gh(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    git_sync("config", f"url.{tmp_path / 'elsewhere.git'}.pushInsteadOf", str(origin), cwd=repo)
    with pytest.raises(
        PublishFailed, match=r"the push settings changed since T25 started \(\+url\."
    ):
        await publish(worktrees, task)
    assert git_sync("for-each-ref", cwd=origin) == ""


needs_lfs = pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed")


async def lfs_branch(tmp_path: Path) -> tuple[Worktrees, Task, Path]:
    """A task branch adding a file under an LFS pattern, and a bare `origin` to push to."""
    repo = make_repo(tmp_path / "repo")
    git_sync("lfs", "install", "--local", "--skip-repo", cwd=repo)
    (repo / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    git_sync("add", ".gitattributes", cwd=repo)
    git_sync("commit", "-qm", "assets in LFS", cwd=repo)
    origin = tmp_path / "origin.git"
    git_sync("init", "--bare", "--quiet", str(origin), cwd=tmp_path)
    git_sync("remote", "add", "origin", str(origin), cwd=repo)
    worktrees = started(repo)
    task = Task(
        id="T-5", project="p", title="An asset", type=TaskType.FEAT, created_at=NOW,
        state_since=NOW,
    )  # fmt: skip
    path = await worktrees.ensure(task)
    (path / "logo.bin").write_bytes(b"the real logo\n")
    await worktrees.history.commit_all(task, "T-5: An asset")
    return worktrees, task, origin


@needs_lfs
async def test_a_branch_carrying_lfs_files_pushes_their_content_first(tmp_path):
    """The push runs no hook, so git-lfs's pre-push never ran: the remote got pointers to
    content it did not have."""
    worktrees, task, origin = await lfs_branch(tmp_path)
    note = await publish(worktrees, task)
    assert note.startswith("pushed feat/T-5 to origin")
    stored = [p for p in (origin / "lfs" / "objects").rglob("*") if p.is_file()]
    assert [p.read_bytes() for p in stored] == [b"the real logo\n"]


@needs_lfs
async def test_without_git_lfs_a_branch_carrying_lfs_files_is_not_pushed(tmp_path, monkeypatch):
    worktrees, task, origin = await lfs_branch(tmp_path)
    git_only = tmp_path / "git-only"
    git_only.mkdir()
    (git_only / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(git_only))
    with pytest.raises(PublishFailed, match="git-lfs is not on PATH") as refused:
        await publish(worktrees, task)
    assert "install git-lfs" in (refused.value.hint or "")
    assert git_sync("for-each-ref", cwd=origin) == ""  # nothing pushed
