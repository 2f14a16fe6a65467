"""The driver names T25 switches off before each git call are read from the config once and
kept until a config file changes (core.workspace.driver_names): never stale, so a filter
planted after they were kept is still switched off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.workspace import driver_names as names_module
from core.workspace import git as git_module
from core.workspace import settled_files
from core.workspace.git import neutral_drivers
from core.workspace.worktrees import Worktrees
from tests.support.git import make_task, plain_git
from tests.support.repos import make_repo
from tests.support.waiting import until


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", "trunk", {"app.py": "x = 1\n"}, exclude_factory=True)


@pytest.fixture
def settled() -> None:
    names_module.forget()


async def once_settled(directory: Path) -> None:
    """Until the files of `directory`'s config were last changed long enough ago (a few
    clock ticks): only then are its names kept."""
    files = names_module.config_files(directory)
    assert files is not None
    await until(lambda: settled_files.settled_state(files) is not None, timeout=10)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories whose config a `git config` process was started to read."""
    seen: list[Path] = []
    real = git_module._config_names

    async def counted(directory: Path) -> bytes:
        seen.append(directory)
        return await real(directory)

    monkeypatch.setattr(git_module, "_config_names", counted)
    return seen


async def test_an_unchanged_config_is_read_once(repo, settled, reads):
    await once_settled(repo)
    first = await neutral_drivers(repo)
    assert await neutral_drivers(repo) == first
    assert reads == [repo]


async def test_a_filter_planted_after_the_names_were_kept_is_switched_off(repo, settled, reads):
    await once_settled(repo)
    await neutral_drivers(repo)
    plain_git("config", "filter.evil.clean", "touch /tmp/never", cwd=repo)

    out = dict(await neutral_drivers(repo))

    assert out["filter.evil.process"] == "" and out["filter.evil.required"] == "false"
    assert reads == [repo, repo]


async def test_a_config_rewritten_in_place_with_its_size_and_mtime_is_read_again(
    repo, settled, reads
):
    config = repo / ".git" / "config"
    planted = b'[merge "e"]\n\tdriver = x\n'
    with config.open("ab") as f:  # a comment as long as what will be planted in its place
        f.write(b"#" * (len(planted) - 1) + b"\n")
    await once_settled(repo)
    await neutral_drivers(repo)
    before = config.stat()
    body = config.read_bytes()
    with config.open("r+b") as f:  # same inode, same size: only the ctime tells
        f.write(body[: len(body) - len(planted)] + planted)
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))

    out = dict(await neutral_drivers(repo))

    assert out.get("merge.e.driver") == "false"
    assert reads == [repo, repo]


async def test_a_config_with_an_include_is_read_before_every_call(repo, tmp_path, settled, reads):
    included = tmp_path / "more.gitconfig"
    included.write_text("")
    plain_git("config", "include.path", str(included), cwd=repo)
    await once_settled(repo)
    await neutral_drivers(repo)
    included.write_text('[filter "inc"]\n\tclean = touch /tmp/never\n')

    out = dict(await neutral_drivers(repo))

    assert out["filter.inc.clean"] == ""
    assert reads == [repo, repo]


async def test_a_worktrees_own_config_is_followed(repo, settled, reads):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    task = make_task()
    tree = await wt.ensure(task)
    plain_git("config", "extensions.worktreeConfig", "true", cwd=repo)
    plain_git("config", "--worktree", "user.name", "mine", cwd=tree)
    await once_settled(tree)
    reads.clear()  # making the worktree read the repository's config
    await neutral_drivers(tree)
    assert reads == [tree]
    plain_git("config", "--worktree", "filter.mine.clean", "touch /tmp/never", cwd=tree)

    out = dict(await neutral_drivers(tree))

    assert out["filter.mine.clean"] == ""
    assert reads == [tree, tree]


async def test_a_config_changed_a_moment_ago_is_not_kept(repo, reads, monkeypatch):
    names_module.forget()
    monkeypatch.setattr(settled_files, "SETTLED_FINE_NS", 10**12)  # a tick longer than the test
    await neutral_drivers(repo)
    await neutral_drivers(repo)
    assert reads == [repo, repo]
