"""The main checkout's fingerprint: every way an agent could write it is reported, and
nothing an agent legitimately does in its own worktree is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.domain.models import Task, TaskType, utcnow
from core.workspace.fingerprint import changed, fingerprint
from core.workspace.worktrees import Worktrees
from tests.support.git import plain_git
from tests.support.repos import make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"app.py": "x = 1\n", ".gitignore": "*.log\n"}
    return make_repo(tmp_path / "repo", "trunk", files, exclude_factory=True)


@pytest.fixture
def wt(repo: Path) -> Worktrees:
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")


@pytest.fixture
def task() -> Task:
    now = utcnow()
    return Task(
        id="T-1", project="demo", title="t", type=TaskType.FEAT, created_at=now, state_since=now
    )


async def test_nothing_changed_means_no_changes(repo):
    assert changed(await fingerprint(repo), await fingerprint(repo)) == []


async def test_a_new_file_in_the_main_checkout(repo, wt, task):
    path = await wt.ensure(task)
    before = await wt.fingerprint()
    (path / ".." / ".." / ".." / "ESCAPED.txt").write_text("an agent wrote outside its tree")
    assert changed(before, await wt.fingerprint()) == ["new file ESCAPED.txt"]


async def test_ignored_files_and_empty_directories_never_count(repo):
    """What the operator's tools write where git ignores it (a test cache, a build) is
    nobody's change to answer for; a new file git sees is."""
    before = await fingerprint(repo)
    (repo / "debug.log").write_text("ignored\n")
    (repo / "empty").mkdir()
    (repo / "notes").mkdir()
    (repo / "notes" / "todo.txt").write_text("seen\n")
    assert changed(before, await fingerprint(repo)) == ["new file notes/todo.txt"]


async def test_a_modified_and_a_deleted_file(repo):
    before = await fingerprint(repo)
    (repo / "app.py").write_text("x = 2  # longer\n")
    (repo / ".gitignore").unlink()
    assert changed(before, await fingerprint(repo)) == [
        "deleted file .gitignore",
        "modified file app.py",
    ]


async def test_a_file_changed_again_is_a_change(repo):
    (repo / "app.py").write_text("x = 2\n")
    before = await fingerprint(repo)
    (repo / "app.py").write_text("x = 3  # longer\n")
    assert changed(before, await fingerprint(repo)) == ["modified file app.py (size, mtime)"]


async def test_a_chmod_is_a_change(repo):
    before = await fingerprint(repo)
    os.chmod(repo / "app.py", 0o755)
    assert changed(before, await fingerprint(repo)) == ["modified file app.py"]


async def test_staging_without_touching_a_file_is_a_change(repo):
    (repo / "app.py").write_text("x = 2\n")
    before = await fingerprint(repo)
    plain_git("add", "app.py", cwd=repo)
    assert changed(before, await fingerprint(repo)) == [
        "git status of app.py changed from ' M' to 'M '"
    ]


async def test_head_moved(repo):
    before = await fingerprint(repo)
    old = plain_git("rev-parse", "HEAD", cwd=repo)
    plain_git("commit", "--quiet", "--allow-empty", "-m", "sneaky", cwd=repo)
    new = plain_git("rev-parse", "HEAD", cwd=repo)
    assert changed(before, await fingerprint(repo)) == [
        f"HEAD moved from trunk@{old[:12]} to trunk@{new[:12]}"
    ]


async def test_head_detached(repo):
    before = await fingerprint(repo)
    plain_git("switch", "--quiet", "--detach", cwd=repo)
    sha = plain_git("rev-parse", "HEAD", cwd=repo)[:12]
    assert changed(before, await fingerprint(repo)) == [
        f"HEAD moved from trunk@{sha} to (detached)@{sha}"
    ]


async def test_shared_config_written_from_inside_a_worktree(repo, wt, task):
    path = await wt.ensure(task)
    before = await wt.fingerprint()
    plain_git("config", "core.hooksPath", "x", cwd=path)  # lands in the shared .git/config
    assert changed(before, await wt.fingerprint()) == [".git/config changed: +core.hookspath=x"]


async def test_hooks_added_made_executable_and_attributes(repo):
    hooks = repo / ".git" / "hooks"
    (hooks / "post-merge").write_text("#!/bin/sh\n")
    before = await fingerprint(repo)
    (hooks / "pre-commit").write_text("#!/bin/sh\ntouch /tmp/owned\n")
    (hooks / "post-merge").chmod(0o755)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    assert changed(before, await fingerprint(repo)) == [
        "hook changed: post-merge",
        "hook added: pre-commit",
        ".git/info/attributes created",
    ]


async def test_per_checkout_config_is_watched_too(repo):
    before = await fingerprint(repo)
    (repo / ".git" / "config.worktree").write_text("[core]\n\tfsmonitor = /tmp/evil\n")
    assert changed(before, await fingerprint(repo)) == [".git/config.worktree created"]


async def test_only_the_worktree_changing_reports_nothing(repo, wt, task):
    path = await wt.ensure(task)
    before = await wt.fingerprint()
    # What an agent legitimately does in its own tree, committing with plain git…
    (path / "feature.py").write_text("y = 1\n")
    (path / "app.py").write_text("x = 3\n")
    (path / "build.log").write_text("ignored output\n")
    plain_git("add", "feature.py", cwd=path)
    plain_git("commit", "--quiet", "-m", "agent commit", cwd=path)
    plain_git("status", cwd=path)
    # …and what T25 does around it, including writing its store under .factory/.
    await wt.history.commit_all(task, "T25 commit")
    await wt.changes.diff_stat(task)
    (repo / ".factory" / "t25.db").write_bytes(b"store")
    assert changed(before, await wt.fingerprint()) == []


async def test_a_root_elsewhere_in_the_repository_is_excluded_when_named(repo, task):
    wt = Worktrees(repo, repo / "trees", "trunk", owner="install-a")
    before = await wt.fingerprint()
    path = await wt.ensure(task)
    (path / "feature.py").write_text("y = 1\n")
    assert changed(before, await wt.fingerprint()) == []
    assert "new file trees/T-1/" in changed(before, await fingerprint(repo))


async def test_taking_a_fingerprint_changes_nothing(repo):
    (repo / "app.py").write_text("x = 2\n")  # a dirty tree: status must not rewrite the index
    index = (repo / ".git" / "index").read_bytes()
    first = await fingerprint(repo)
    second = await fingerprint(repo)
    assert changed(first, second) == []
    assert (repo / ".git" / "index").read_bytes() == index


async def test_every_ref_but_other_tasks_branches(repo, wt, task):
    path = await wt.ensure(task)
    before = await wt.fingerprint(task)
    head = plain_git("rev-parse", "HEAD", cwd=repo)
    plain_git("tag", "v-planted", cwd=path)
    plain_git(
        "replace",
        "-f",
        head,
        plain_git("commit-tree", "-m", "x", f"{head}^{{tree}}", cwd=path),
        cwd=path,
    )
    plain_git("branch", "side", cwd=path)
    plain_git("branch", "fix/T-9", cwd=path)  # another task's branch: its own run measures it
    (path / "f.txt").write_text("agent\n")
    plain_git("add", "f.txt", cwd=path)
    plain_git("commit", "-qm", "agent", cwd=path)  # this task's own branch moves
    after = await wt.fingerprint(task)
    replaced = plain_git("rev-parse", f"refs/replace/{head}", cwd=repo)
    tip = plain_git("rev-parse", "feat/T-1", cwd=repo)
    planted = [
        f"ref refs/heads/side created at {head[:12]}",
        f"ref refs/replace/{head} created at {replaced[:12]}",
        f"ref refs/tags/v-planted created at {head[:12]}",
    ]
    assert changed(before, after) == [
        f"ref refs/heads/feat/T-1 moved from {head[:12]} to {tip[:12]}",
        *planted,
    ]
    assert changed(before, after, may_move=["refs/heads/feat/T-1"]) == planted


async def test_info_files_index_flags_and_a_rewrite_that_keeps_size_and_mtime(repo):
    before = await fingerprint(repo)
    (repo / ".git" / "info" / "exclude").write_text("/.factory/\n*.py\n")
    plain_git("update-index", "--assume-unchanged", "app.py", cwd=repo)
    gitignore = repo / ".gitignore"
    st = gitignore.stat()
    gitignore.write_text("*.lag\n")  # the same size ...
    os.utime(gitignore, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and the old mtime
    assert changed(before, await fingerprint(repo)) == [
        ".git/info/exclude changed",
        "modified file .gitignore",
        "index flags of app.py changed (assume-unchanged or skip-worktree)",
    ]


async def test_the_global_config_and_the_task_worktrees_own_config(
    repo, wt, task, tmp_path, monkeypatch
):
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    path = await wt.ensure(task)
    before = await wt.fingerprint(task)
    (home / ".gitconfig").write_text("[core]\n\tfsmonitor = /tmp/evil\n")
    (home / ".config" / "git" / "config").write_text("[core]\n\thooksPath = /tmp/evil\n")
    admin = plain_git("rev-parse", "--absolute-git-dir", cwd=path)
    Path(admin, "config.worktree").write_text("[core]\n\tpager = /tmp/evil\n")
    assert changed(before, await wt.fingerprint(task)) == [
        ".git/worktrees/T-1/config.worktree created",
        "~/.config/git/config created",
        "~/.gitconfig created",
    ]


async def test_head_moved_along_t25s_landed_merges_is_not_a_change(repo):
    before = await fingerprint(repo)
    for n in (1, 2):  # two merges landed while one run went on
        plain_git("commit", "--quiet", "--allow-empty", "-m", f"Merge feat/T-{n}", cwd=repo)
        head = plain_git("rev-parse", "HEAD", cwd=repo)
        plain_git("update-ref", f"refs/t25/landed/T-{n}", head, cwd=repo)
    assert changed(before, await fingerprint(repo)) == []
    plain_git("commit", "--quiet", "--allow-empty", "-m", "the operator's", cwd=repo)
    assert [c.split(" to ")[0] for c in changed(before, await fingerprint(repo))] == [
        f"HEAD moved from trunk@{before.head_sha[:12]}"
    ]


async def test_a_fetch_is_not_a_change(repo, tmp_path):
    other = tmp_path / "other"
    plain_git("clone", "-q", str(repo), str(other), cwd=tmp_path)
    plain_git("branch", "hotfix", cwd=other)
    before = await fingerprint(repo)
    plain_git("fetch", "-q", str(other), "+refs/heads/*:refs/remotes/origin/*", cwd=repo)
    assert plain_git("rev-parse", "refs/remotes/origin/hotfix", cwd=repo)
    assert changed(before, await fingerprint(repo)) == []
