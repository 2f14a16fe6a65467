"""Real repository shapes: Git LFS, submodules, sparse checkouts and a default branch with
no local commit. Each works in a task's worktree or fails in one clear line, never
silently: real repositories in temp dirs, T25's real worktree and pipeline code, and the
scripted agent as the developer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.domain.models import TaskState
from core.errors import WorktreeRefused
from core.workspace.worktrees import Worktrees
from tests.support.git import Planted, make_task, plain_git
from tests.support.pipeline import Env, trunk_log
from tests.support.repos import make_repo, make_shop

S = TaskState
LFS_CONTENT = "the real asset\n"
POINTER = "version https://git-lfs.github.com/spec/v1"
needs_lfs = pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed")


def lfs_upstream(where: Path) -> Path:
    """The shop project with `*.bin` in Git LFS and one asset committed through it."""
    repo = make_shop(where)
    plain_git("lfs", "install", "--local", cwd=repo)
    plain_git("lfs", "track", "*.bin", cwd=repo)
    (repo / "asset.bin").write_text(LFS_CONTENT)
    plain_git("add", "-A", cwd=repo)
    plain_git("commit", "-qm", "an asset in LFS", cwd=repo)
    assert plain_git("cat-file", "blob", "HEAD:asset.bin", cwd=repo).startswith(POINTER)
    return repo


def lfs_clone(upstream: Path, where: Path, **env: str) -> Path:
    """A clone of `upstream` as `git clone` makes one, LFS objects fetched from it."""
    argv = ["git", "clone", "-q", str(upstream), str(where)]
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ, **env})
    plain_git("lfs", "install", "--local", cwd=where)
    for key in ("user.name", "user.email"):
        plain_git("config", key, plain_git("config", key, cwd=upstream), cwd=where)
    (where / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    return where


def worktrees(repo: Path) -> Worktrees:
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")


def no_lfs_path(tmp_path: Path) -> str:
    """A PATH with git on it and no git-lfs."""
    bin_dir = tmp_path / "bin-without-lfs"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    return str(bin_dir)


@pytest.fixture
async def lfs_env(tmp_path):
    """A factory on a fresh clone of an LFS repository whose QA check needs the asset."""
    upstream = lfs_upstream(tmp_path / "up")
    clone = lfs_clone(upstream, tmp_path / "clone")
    e = Env(clone)
    yield e
    await e.close()


# -- Git LFS ---------------------------------------------------------------------------------


@needs_lfs
async def test_an_lfs_task_sees_the_asset_commits_through_lfs_and_merges_from_a_fresh_clone(
    lfs_env,
):
    repo = lfs_env.repo
    # The clone's asset was written after its index: git compares content, as it does for
    # any file whose stat changed, and `git status` (with git-lfs's filter) is clean.
    stamp = (repo / ".git" / "index").stat().st_mtime + 5
    os.utime(repo / "asset.bin", (stamp, stamp))
    assert plain_git("status", "--porcelain", cwd=repo) == ""
    needs_asset = f"assert open('asset.bin').read() == {LFS_CONTENT!r}, open('asset.bin').read()"
    control = await lfs_env.open(
        qa={"checks": [{"name": "asset", "run": [sys.executable, "-c", needs_asset]}]}
    )
    task = await lfs_env.new(description=r"scripted: write=art/new.bin:drawn by the agent\n")
    await lfs_env.work()
    task = await lfs_env.task(task.id)
    assert task.state is S.DONE and task.checks_passed, task.error

    # the agent's file under an LFS pattern is a pointer in the commit, its content in LFS
    blob = plain_git("cat-file", "blob", f"{task.branch}:art/new.bin", cwd=repo)
    assert blob.startswith(POINTER), blob
    oid = blob.split("oid sha256:")[1].split()[0]
    stored = repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    assert stored.read_text() == "drawn by the agent\n"

    task = await control.merge(task.id, actor="ana")
    assert task.merged and trunk_log(repo)[0].startswith("Merge feat/T-1")
    assert (repo / "art" / "new.bin").read_text() == "drawn by the agent\n"
    assert plain_git("status", "--porcelain", cwd=repo) == ""


@needs_lfs
async def test_the_merge_of_a_fresh_lfs_clone_is_not_refused_while_git_status_is_clean(tmp_path):
    repo = lfs_clone(lfs_upstream(tmp_path / "up"), tmp_path / "clone")
    stamp = (repo / ".git" / "index").stat().st_mtime + 5  # git must compare content
    os.utime(repo / "asset.bin", (stamp, stamp))
    assert plain_git("status", "--porcelain", cwd=repo) == ""
    wt, task = worktrees(repo), make_task()
    path = await wt.ensure(task)
    (path / "notes.txt").write_text("a change\n")
    assert await wt.history.commit_all(task, "T-1: notes")
    merged = await wt.merges.merge(task, message="Merge T-1")
    assert plain_git("rev-parse", "trunk", cwd=repo) == merged
    assert (repo / "asset.bin").read_text() == LFS_CONTENT


@needs_lfs
async def test_a_filter_the_repository_names_for_lfs_never_runs(tmp_path):
    repo = lfs_clone(lfs_upstream(tmp_path / "up"), tmp_path / "clone")
    planted = Planted(tmp_path)
    for var in ("process", "clean", "smudge"):
        plain_git("config", f"filter.lfs.{var}", planted.program(f"lfs-{var}"), cwd=repo)
    path = await worktrees(repo).ensure(make_task())
    assert (path / "asset.bin").read_text() == LFS_CONTENT
    assert planted.ran() == []


@needs_lfs
async def test_an_lfs_object_missing_from_the_local_store_refuses_the_worktree(tmp_path):
    repo = lfs_clone(lfs_upstream(tmp_path / "up"), tmp_path / "clone", GIT_LFS_SKIP_SMUDGE="1")
    assert not [
        p for p in (repo / ".git" / "lfs").rglob("*") if p.is_file() and "objects" in str(p)
    ]
    wt = worktrees(repo)
    with pytest.raises(WorktreeRefused) as refused:
        await wt.ensure(make_task())
    assert "the Git LFS content of asset.bin is not in the main checkout's local LFS store" in (
        refused.value.message
    )
    assert "git lfs fetch" in refused.value.hint
    assert not wt.has_worktree(make_task())


@needs_lfs
async def test_without_git_lfs_the_worktree_is_refused_in_one_line(tmp_path, monkeypatch):
    repo = lfs_clone(lfs_upstream(tmp_path / "up"), tmp_path / "clone")
    monkeypatch.setenv("PATH", no_lfs_path(tmp_path))
    with pytest.raises(WorktreeRefused) as refused:
        await worktrees(repo).ensure(make_task())
    assert "keeps files in Git LFS (.gitattributes: filter=lfs) but git-lfs is not on PATH" in (
        refused.value.message
    )
    assert "\n" not in refused.value.message and "install git-lfs" in refused.value.hint


@needs_lfs
def test_doctor_says_git_lfs_is_missing_for_a_repository_that_uses_it(tmp_path, t25):
    repo = lfs_clone(lfs_upstream(tmp_path / "up"), tmp_path / "clone")
    write_config(repo)
    path = f"{no_lfs_path(tmp_path)}:{Path(sys.executable).parent}"
    done = t25("doctor", "--verbose", cwd=repo, env={"PATH": path})  # a problem a line
    assert done.code == 1, done.out + done.err
    problem = next(line for line in done.out.splitlines() if "git-lfs" in line)
    assert "project shop" in problem and "git-lfs is not on PATH" in problem
    assert "(hint: install git-lfs" in problem


def write_config(repo: Path) -> None:
    roles = ("spec", "planner", "dev", "qa", "reviewer", "docs")
    config = {
        "projects": [{"name": "shop", "repo": "."}],
        "roles": {role: [{"adapter": "scripted"}] for role in roles},
    }
    (repo / "t25.yaml").write_text(yaml.safe_dump(config))


# -- submodules ------------------------------------------------------------------------------


def with_submodule(where: Path) -> Path:
    """The shop project with a library as a submodule at vendor/lib, added from a local
    repository; the URL the config then names reaches nothing."""
    lib = make_repo(where / "lib", "main", {"lib.txt": "v1\n"})
    repo = make_shop(where)
    plain_git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib",
        cwd=repo,
    )  # fmt: skip
    plain_git("commit", "-qm", "the library", cwd=repo)
    plain_git("config", "submodule.vendor/lib.url", "https://t25.invalid/lib.git", cwd=repo)
    return repo


async def test_a_worktree_checks_out_submodules_from_the_main_checkouts_copies(tmp_path):
    repo = with_submodule(tmp_path)
    config = (repo / ".git" / "config").read_text()
    wt = worktrees(repo)
    path = await wt.ensure(make_task())
    assert (path / "vendor" / "lib" / "lib.txt").read_text() == "v1\n"
    assert (repo / ".git" / "config").read_text() == config  # nothing written there
    # a clean submodule does not keep the worktree at cleanup
    done = await wt.cleanup(make_task())
    assert done.removed, done.reason
    assert not path.exists()


async def test_an_edit_inside_a_submodule_fails_the_stage_naming_it(tmp_path):
    env = Env(with_submodule(tmp_path))
    try:
        await env.open()
        task = await env.new(description="scripted: write=vendor/lib/lib.txt:v2")
        await env.work()
        task = await env.task(task.id)
    finally:
        await env.close()
    assert task.state is S.FAILED
    assert "T25 does not commit changes inside a submodule: vendor/lib (changed files)" in (
        task.error
    )
    assert "\n" not in task.error


async def test_files_written_into_a_submodule_that_is_not_checked_out_are_refused(tmp_path):
    upstream = with_submodule(tmp_path / "up")
    repo = tmp_path / "clone"  # cloned without its submodules: vendor/lib is empty there too
    plain_git("clone", "-q", str(upstream), str(repo), cwd=tmp_path)
    (repo / ".git" / "info" / "exclude").write_text("/.factory/\n")
    wt = worktrees(repo)
    path = await wt.ensure(make_task())
    assert list((path / "vendor" / "lib").iterdir()) == []
    (path / "vendor" / "lib" / "fix.txt").write_text("lost before\n")
    with pytest.raises(WorktreeRefused, match=r"vendor/lib \(files written into it, and it is"):
        await wt.history.commit_all(make_task(), "T-1: fix")


async def test_a_repository_made_inside_the_worktree_is_not_committed_as_a_submodule(tmp_path):
    wt = worktrees(make_shop(tmp_path))
    path = await wt.ensure(make_task())
    inner = make_repo(path / "vendored", "main", {"x.txt": "made by the agent\n"})
    assert (inner / ".git").is_dir()
    with pytest.raises(WorktreeRefused, match=r"inside a submodule: vendored \(a new submodule\)"):
        await wt.history.commit_all(make_task(), "T-1: vendor it")


# -- sparse checkouts ------------------------------------------------------------------------


def sparse_shop(where: Path) -> Path:
    repo = make_shop(where)
    for name in ("docs/guide.md", "assets/logo.txt"):
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text(f"{name}\n")
    plain_git("add", "-A", cwd=repo)
    plain_git("commit", "-qm", "docs and assets", cwd=repo)
    plain_git("sparse-checkout", "set", "docs", cwd=repo)
    assert not (repo / "assets").exists()
    return repo


async def test_a_worktree_follows_the_main_checkouts_sparse_cone(tmp_path):
    path = await worktrees(sparse_shop(tmp_path)).ensure(make_task())
    assert (path / "docs" / "guide.md").is_file() and (path / "app.py").is_file()
    assert not (path / "assets").exists()


@pytest.mark.parametrize("target", ["assets/new.txt", "assets/logo.txt"])
async def test_a_write_outside_the_sparse_cone_fails_the_stage_with_its_path(tmp_path, target):
    env = Env(sparse_shop(tmp_path))
    try:
        await env.open()
        task = await env.new(description=f"scripted: write={target}:drawn")
        await env.work()
        task = await env.task(task.id)
    finally:
        await env.close()
    assert task.state is S.FAILED
    assert (
        "the change writes outside the sparse checkout the worktree follows (the main "
        f"checkout's): {target}"
    ) in task.error
    assert "hint: Disable this message" not in task.error and "\n" not in task.error


# -- the default branch ----------------------------------------------------------------------


def test_doctor_finds_an_empty_repository(tmp_path, t25):
    repo = tmp_path / "empty"
    repo.mkdir()
    plain_git("init", "-q", "-b", "trunk", cwd=repo)
    write_config(repo)
    done = t25("doctor", "--verbose", cwd=repo)  # a problem a line
    assert done.code == 1, done.out + done.err
    assert "the default branch trunk has no commit here, so no task can start from it" in (done.out)
    assert "(hint: make a first commit on it" in done.out


def test_doctor_finds_a_default_branch_that_exists_only_at_origin(tmp_path, t25):
    upstream = make_shop(tmp_path)
    repo = tmp_path / "clone"
    plain_git("clone", "-q", str(upstream), str(repo), cwd=tmp_path)
    plain_git("switch", "-q", "-c", "work", cwd=repo)
    plain_git("branch", "-q", "-D", "trunk", cwd=repo)
    write_config(repo)
    done = t25("doctor", "--verbose", cwd=repo)  # a problem a line
    assert done.code == 1, done.out + done.err
    assert "the default branch trunk has no commit here" in done.out
    assert "(hint: create it from origin's: git branch trunk origin/trunk)" in done.out
