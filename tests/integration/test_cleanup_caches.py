"""Caches do not keep a worktree (`worktrees.caches`), and `t25 cleanup --dry-run` says what
the cleanup then does: real repositories, real git, the real command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.config.caches import DEFAULT_CACHES
from core.config.schema import load_config
from core.domain.events import WorktreeCleaned
from core.errors import ConfigError
from core.workspace.caches import cache_of, sort_leftovers
from core.workspace.git import git_sync
from core.workspace.worktrees import Worktrees
from tests.support.git import make_task, new_repo, plain_git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return new_repo(tmp_path / "repo")


def _pytest_cache(tree: Path) -> None:
    """What pytest leaves: `.pytest_cache/` ignoring itself with a `.gitignore` inside."""
    cache = tree / ".pytest_cache"
    (cache / "v" / "cache").mkdir(parents=True)
    (cache / ".gitignore").write_text("# created by pytest automatically, do not change\n*\n")
    (cache / "v" / "cache" / "nodeids").write_text("[]\n")


def _caches(tree: Path) -> None:
    """A tree's usual caches: some ignored, some merely untracked (no .gitignore names them)."""
    _pytest_cache(tree)
    for where in ("__pycache__", "pkg/__pycache__"):
        (tree / where).mkdir(parents=True)
        (tree / where / "app.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (tree / "web" / "node_modules" / ".cache" / "babel").mkdir(parents=True)
    (tree / "web" / "node_modules" / ".cache" / "babel" / "x.json").write_text("{}")
    (tree / "target" / "debug").mkdir(parents=True)
    (tree / "target" / "debug" / "app").write_bytes(b"\x7fELF")


# -- what is a cache ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "caches", "cache"),
    [
        ("__pycache__/a.pyc", DEFAULT_CACHES, "__pycache__/"),
        ("src/pkg/__pycache__/a.pyc", DEFAULT_CACHES, "src/pkg/__pycache__/"),
        (".pytest_cache/", DEFAULT_CACHES, ".pytest_cache/"),  # an ignored directory
        ("web/node_modules/.cache/babel/x.json", DEFAULT_CACHES, "web/node_modules/.cache/"),
        ("web/node_modules/left-pad/index.js", DEFAULT_CACHES, None),
        ("target/debug/app", DEFAULT_CACHES, "target/"),
        ("target", DEFAULT_CACHES, None),  # a file of that name is no cache directory
        ("notes/__pycache__.txt", DEFAULT_CACHES, None),
        ("build.log", DEFAULT_CACHES, None),
        ("crates/x/target/debug/app", ("/target",), None),  # anchored at the top
        ("target/debug/app", ("/target",), "target/"),
        ("pkg.egg-info/PKG-INFO", ("*.egg-info",), "pkg.egg-info/"),
    ],
)
def test_a_cache_is_what_lies_in_a_directory_the_list_names(path, caches, cache):
    assert cache_of(path, caches) == cache


def test_changes_and_nested_repositories_are_never_caches():
    left = sort_leftovers(
        [(" M", "__pycache__/tracked.pyc"), ("??", "target/"), ("!!", "target/"), ("??", "a.py")],
        DEFAULT_CACHES,
    )
    assert left.keeping == {
        "uncommitted": ["__pycache__/tracked.pyc"],
        "untracked": ["target/", "a.py"],  # an untracked directory is a repository of its own
        "ignored": [],
    }
    assert left.caches == ("target/",)


def test_the_list_is_configurable_and_its_entries_checked(repo):
    config = repo / "t25.yaml"
    project = "projects: [{name: demo, repo: .}]\n"
    config.write_text(project)
    assert load_config(config).worktrees.caches == list(DEFAULT_CACHES)
    config.write_text(project + "worktrees: {caches: [.gradle, /dist]}\n")
    assert load_config(config).worktrees.caches == [".gradle", "/dist"]
    for bad in ("..", "a/../b", "/", ".git/objects"):
        config.write_text(project + f"worktrees: {{caches: ['{bad}']}}\n")
        with pytest.raises(ConfigError, match=r"worktrees\.caches"):
            load_config(config)


# -- the cleanup -------------------------------------------------------------------------------


async def test_a_tree_holding_only_caches_is_removed_and_its_snapshot_holds_none(repo):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    task = make_task()
    path = await wt.ensure(task)
    (path / "done.py").write_text("done = True\n")
    sha = await wt.history.commit_all(task, "done")
    _caches(path)
    dry = await wt.cleanup(task, dry_run=True)
    assert dry.removed and dry.reason.startswith(f"would remove {path} (its caches with it: ")
    assert path.is_dir()  # a dry run removes nothing
    done = await wt.cleanup(task)
    assert done.removed, done.reason
    assert "(its caches with it: 6 files in " in done.reason
    assert "web/node_modules/.cache/" in done.reason and "branch feat/T-1 kept" in done.reason
    assert not path.exists()
    # The untracked caches were dropped, not committed into the kept snapshot.
    assert plain_git("rev-parse", "refs/t25/snapshots/T-1/1", cwd=repo) == sha


async def test_anything_beside_the_caches_still_keeps_the_tree(repo):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    task = make_task()
    path = await wt.ensure(task)
    _caches(path)
    (path / "build.log").write_text("ignored, and no cache\n")  # .gitignore: *.log
    (path / "target.txt").write_text("untracked\n")
    kept = await wt.cleanup(task)
    assert not kept.removed
    assert "1 untracked, 1 ignored file(s): target.txt, build.log;" in kept.reason
    assert "pycache" not in kept.reason and ".pytest_cache" not in kept.reason
    assert (path / "__pycache__" / "app.cpython-311.pyc").exists()  # nothing dropped


async def test_an_empty_list_keeps_a_tree_for_its_caches(repo):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a", caches=())
    task = make_task()
    path = await wt.ensure(task)
    _pytest_cache(path)
    kept = await wt.cleanup(task)
    assert not kept.removed and "2 ignored file(s): .pytest_cache/.gitignore" in kept.reason


async def test_a_link_in_a_cache_is_dropped_never_what_it_points_to(repo, tmp_path):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    task = make_task()
    path = await wt.ensure(task)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (path / "__pycache__").mkdir()
    os.symlink(precious, path / "__pycache__" / "app.pyc")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "__pycache__").mkdir(parents=True)
    (elsewhere / "__pycache__" / "x.pyc").write_text("not the tree's\n")
    done = await wt.cleanup(task)
    assert done.removed, done.reason
    assert precious.read_text() == "keep me\n"
    assert (elsewhere / "__pycache__" / "x.pyc").exists()


async def test_a_locked_tree_is_kept_and_the_dry_run_says_so_first(repo):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    task = make_task()
    path = await wt.ensure(task)
    plain_git("worktree", "lock", "--reason", "on a USB disk", str(path), cwd=repo)
    dry = await wt.cleanup(task, dry_run=True)
    done = await wt.cleanup(task)
    assert not dry.removed and not done.removed and path.is_dir()
    assert dry.reason == done.reason.replace("kept", "would keep", 1)
    assert "git has it locked (on a USB disk)" in done.reason


# -- through the pipeline and the command line -------------------------------------------------


async def test_a_merge_removes_a_tree_its_checks_left_caches_in(env):
    control = await env.open()
    task = await env.new()
    await env.work()
    path = control.worktrees("shop").path_for(task.id)
    assert (await env.task(task.id)).state.value == "DONE"
    _caches(path)
    await control.merge(task.id, actor="ana")
    assert not path.exists()
    events = await control.store.events_after(0, task_id=task.id, limit=10_000)
    cleaned = [e for e in events if isinstance(e, WorktreeCleaned)]
    assert cleaned[-1].removed and "its caches with it" in cleaned[-1].reason


async def test_the_dry_run_says_what_the_cleanup_then_does(env, t25):
    control = await env.open()
    tasks = [await env.new(title) for title in ("Caches only", "A note", "A log")]
    await env.work()
    trees = [control.worktrees("shop").path_for(t.id) for t in tasks]
    for task, tree in zip(tasks, trees, strict=True):
        assert (await env.task(task.id)).state.value == "DONE"
        (tree / "hold.txt").write_text("kept at archive\n")
        await control.archive(task.id, actor="ana")
        assert tree.exists()  # kept for hold.txt
    exclude = env.repo / ".git" / "info" / "exclude"
    exclude.write_text(exclude.read_text() + "*.log\n")
    (trees[0] / "hold.txt").unlink()
    _caches(trees[0])  # only caches: goes
    _caches(trees[1])  # a real untracked file besides: stays
    (trees[2] / "hold.txt").unlink()
    (trees[2] / "run.log").write_text("ignored, no cache\n")  # stays
    await env.close()

    dry = t25("cleanup", "--dry-run", cwd=env.repo)
    real = t25("cleanup", cwd=env.repo)
    assert dry.code == real.code == 1, (dry, real)
    said = dry.out.splitlines()
    done = real.out.splitlines()
    assert len(said) == len(done) == 3
    for would, did, tree in zip(said, done, trees, strict=True):
        if would.startswith(f"T-{trees.index(tree) + 1}  archived: would remove"):
            assert did.startswith(would.replace("would remove", "removed").split(" (")[0])
            assert not tree.exists()
        else:
            assert would == did.replace(": kept ", ": would keep ", 1)
            assert tree.exists()
    assert [t.exists() for t in trees] == [False, True, True]
    assert "1 untracked file(s): hold.txt" in done[1] and "pycache" not in done[1]
    assert "1 ignored file(s): run.log" in done[2]
    assert git_sync("rev-parse", "--verify", "-q", "refs/t25/snapshots/T-1/1", cwd=env.repo)
