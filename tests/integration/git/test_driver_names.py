"""The driver names T25 switches off before each git call are read from the config once and
kept until a config file changes (core.workspace.driver_names): never stale, so a filter
planted after they were kept is still switched off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from core.workspace import driver_names as names_module
from core.workspace import git as git_module
from core.workspace import settled_files
from core.workspace.config_values import flag, kept_values
from core.workspace.git import neutral_drivers
from core.workspace.worktrees import Worktrees
from tests.support.git import git_started, make_task, plain_git, without_identity
from tests.support.repos import make_repo
from tests.support.waiting import until


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", "trunk", {"app.py": "x = 1\n"}, exclude_factory=True)


def plain(argv: list[str], cwd: Path) -> str:
    """What a command prints, its exit status aside (git refuses a value it cannot read)."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True).stdout.strip()


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
    real = git_module._config_entries

    async def counted(directory: Path) -> bytes:
        seen.append(directory)
        return await real(directory)

    monkeypatch.setattr(git_module, "_config_entries", counted)
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


async def test_a_git_directory_written_in_keeps_the_names(repo, settled, reads):
    """`git status` and every index write change the `.git` directory's times, not its
    config: the main checkout's names are not read again for them."""
    await once_settled(repo)
    await neutral_drivers(repo)
    (repo / "app.py").write_text("x = 2\n")
    plain_git("add", "app.py", cwd=repo)  # index.lock made and renamed inside .git
    plain_git("commit", "-q", "-m", "second", cwd=repo)

    await neutral_drivers(repo)

    assert reads == [repo]


async def test_another_git_directory_in_its_place_is_read_again(repo, tmp_path, settled, reads):
    other = make_repo(tmp_path / "other", "trunk", {"b.py": "b = 1\n"})
    plain_git("config", "filter.other.clean", "touch /tmp/never", cwd=other)
    await once_settled(repo)
    await neutral_drivers(repo)
    (repo / ".git").rename(tmp_path / "was")
    (other / ".git").rename(repo / ".git")
    await once_settled(repo)

    out = dict(await neutral_drivers(repo))

    assert out["filter.other.clean"] == ""
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


# -- the values a commit and a staging read from the same kept config -------------------------


async def test_a_commit_reads_its_identity_and_the_sparse_switches_from_the_kept_config(
    repo, settled, monkeypatch
):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    task = make_task()
    tree = await wt.ensure(task)
    await once_settled(tree)
    started = git_started(monkeypatch)
    for n in range(2):
        (tree / f"x{n}.py").write_text("x = 1\n")
        await wt.history.commit_all(task, f"step {n}")

    # No `git config user.name`, no `git config --bool`: at most the kept read, when a
    # config file changed since (a busy machine may find one not yet settled).
    kept = ("config", "--null", "--get-regexp", git_module._KEPT_KEYS)
    assert sum(args[0] == "commit" for args in started) == 2
    assert {args for args in started if args[0] == "config"} <= {kept}


async def test_an_identity_set_after_the_config_was_kept_signs_the_next_commit(
    repo, settled, tmp_path, monkeypatch
):
    without_identity(repo, tmp_path / "empty-home", monkeypatch)
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    task = make_task()
    tree = await wt.ensure(task)
    await once_settled(tree)
    (tree / "a.py").write_text("a = 1\n")
    first = await wt.history.commit_all(task, "by T25")
    plain_git("config", "user.name", "Ana", cwd=repo)
    plain_git("config", "user.email", "ana@shop.test", cwd=repo)
    (tree / "b.py").write_text("b = 1\n")
    second = await wt.history.commit_all(task, "by Ana")

    signed = [
        plain_git("log", "-1", "--format=%an <%ae>", sha, cwd=repo) for sha in (first, second)
    ]
    assert signed == ["T25 <t25@localhost>", "Ana <ana@shop.test>"]


@pytest.mark.parametrize(
    "value", ["true", "yes", "On", "1", "2", "0x10", "false", "no", "off", "0", "", "maybe"]
)
async def test_a_sparse_switch_reads_as_git_reads_it(repo, settled, value):
    plain_git("config", "core.sparseCheckout", value, cwd=repo)
    said = plain(["git", "config", "--bool", "core.sparseCheckout"], repo)
    expected = {"true": True, "false": False}.get(said)

    assert flag(await kept_values(repo), "core.sparsecheckout") is expected


async def test_a_sparse_switch_without_a_value_is_true_as_in_git(repo, settled):
    with (repo / ".git" / "config").open("a") as f:
        f.write("[core]\n\tsparseCheckout\n")
    assert plain(["git", "config", "--bool", "core.sparseCheckout"], repo) == "true"
    assert flag(await kept_values(repo), "core.sparsecheckout") is True
