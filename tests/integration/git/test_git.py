"""The hardened git runner: programs a repository (or an agent in a worktree) plants in
the shared config never run during T25's own git calls. Each planted program leaves a
marker file if it runs; every test also proves, with plain git, that it *would* have run."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import GitError, MergeRefused, T25Error
from core.workspace.git import driver_overrides, git, git_bytes, neutral_drivers, status_entries
from core.workspace.worktrees import Worktrees
from tests.support.git import Planted, make_task, plain_git
from tests.support.repos import make_repo

HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "pre-merge-commit",
    "post-merge",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
    "post-rewrite",
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"notes.txt": "one\ntwo\nthree\nfour\nfive\n", "app.py": "x = 1\n"}
    return make_repo(tmp_path / "repo", "trunk", files, exclude_factory=True)


@pytest.fixture
def wt(repo: Path) -> Worktrees:
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")


@pytest.fixture
def planted(tmp_path: Path) -> Planted:
    return Planted(tmp_path)


# -- the runner itself -------------------------------------------------------------------------


def test_driver_overrides_cover_every_filter_and_merge_driver_name():
    names = "\0".join(
        [
            "filter.lfs.clean",
            "filter.lfs.smudge",
            "filter.a.b=c d.process",
            "merge.ff",
            "merge.ours.driver",
            "merge.Evil.name",
            "other.x.y",
            "",
        ]
    )
    out = dict(driver_overrides(names))
    for name in ("lfs", "a.b=c d"):
        assert out[f"filter.{name}.clean"] == "" and out[f"filter.{name}.smudge"] == ""
        assert out[f"filter.{name}.process"] == "" and out[f"filter.{name}.required"] == "false"
    assert out["merge.ours.driver"] == "false" and out["merge.Evil.driver"] == "false"
    assert "merge.ff.driver" not in out and not any(k.startswith("other") for k in out)


async def test_neutral_drivers_reads_names_from_config_without_running_them(repo, planted):
    plain_git("config", "filter.we=ird name.clean", planted.program("clean"), cwd=repo)
    plain_git("config", "merge.evil.driver", planted.program("driver"), cwd=repo)
    out = dict(await neutral_drivers(repo))
    assert out["filter.we=ird name.process"] == "" and out["merge.evil.driver"] == "false"
    assert planted.ran() == []


async def test_inherited_git_variables_cannot_redirect_a_call(tmp_path, monkeypatch, repo, planted):
    other = tmp_path / "other"
    other.mkdir()
    plain_git("init", "--quiet", cwd=other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", planted.program("external"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.pager={planted.program('pager')}'")
    assert await git("rev-parse", "--show-toplevel", cwd=repo) == str(repo)
    (repo / "app.py").write_text("x = 2\n")
    assert "x = 2" in await git("diff", "--no-ext-diff", cwd=repo)
    assert planted.ran() == []


async def test_a_diff_that_forgets_no_ext_diff_fails_closed(repo, planted):
    plain_git("config", "diff.external", planted.program("external"), cwd=repo)
    (repo / "app.py").write_text("x = 2\n")
    with pytest.raises(GitError, match="external diff died"):
        await git("diff", cwd=repo)
    assert planted.ran() == []


async def test_a_failing_call_raises_with_gits_reason(repo):
    with pytest.raises(GitError, match="no-such-ref") as err:
        await git("rev-parse", "--verify", "no-such-ref", cwd=repo)
    assert isinstance(err.value, T25Error)
    assert await git("rev-parse", "--verify", "no-such-ref", cwd=repo, check=False) == ""


async def test_a_stale_index_lock_is_named_with_its_path_and_how_to_clear_it(repo, wt):
    # A git that died left its lock; git names it on the first line and ends on advice.
    task = make_task()
    path = await wt.ensure(task)
    tip = plain_git("rev-parse", "HEAD", cwd=path)
    lock = Path(
        plain_git("rev-parse", "--path-format=absolute", "--git-path", "index.lock", cwd=path)
    )
    lock.write_text("")
    (path / "app.py").write_text("x = 2\n")
    with pytest.raises(GitError) as err:
        await wt.history.reset(task, tip, snapshot=False)  # what a retried stage does first
    assert f"Unable to create '{lock}': File exists" in err.value.message
    assert err.value.hint == f"if no git process is running there, remove {lock}"


async def test_status_entries_keep_leading_spaces_and_skip_rename_sources(repo):
    (repo / "app.py").write_text("x = 2\n")
    plain_git("mv", "notes.txt", "renamed notes.txt", cwd=repo)
    entries = status_entries(await git_bytes("status", "--porcelain=v1", "-z", cwd=repo))
    assert entries == [(" M", "app.py"), ("R ", "renamed notes.txt")]


# -- planted programs never run ----------------------------------------------------------------


async def test_planted_hooks_never_run(repo, wt, planted):
    for hook in HOOKS:
        (repo / ".git" / "hooks" / hook).write_text(Path(planted.program(hook)).read_text())
        (repo / ".git" / "hooks" / hook).chmod(0o755)
    task = make_task()
    path = await wt.ensure(task)
    (path / "feature.py").write_text("y = 1\n")
    await wt.history.commit_all(task, "feature")
    await wt.merges.merge(task, message="merge")
    assert (await wt.cleanup(task)).removed
    await wt.fingerprint()
    assert planted.ran() == []
    plain_git("commit", "--quiet", "--allow-empty", "-m", "control", cwd=repo)
    assert {"pre-commit", "commit-msg", "post-commit"} <= set(planted.ran())


async def test_a_hooks_path_planted_from_a_worktree_is_ignored(repo, wt, planted):
    task = make_task()
    path = await wt.ensure(task)
    hooks = path.parent / "evil-hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-commit", "post-merge"):
        (hooks / hook).write_text(Path(planted.program(hook)).read_text())
        (hooks / hook).chmod(0o755)
    plain_git("config", "core.hooksPath", str(hooks), cwd=path)  # writes the shared config
    (path / "feature.py").write_text("y = 1\n")
    await wt.history.commit_all(task, "feature")
    await wt.merges.merge(task, message="merge")
    assert planted.ran() == []
    plain_git("commit", "--quiet", "--allow-empty", "-m", "control", cwd=repo)
    assert "pre-commit" in planted.ran()


@pytest.mark.parametrize("name", ["evil", "we=ird"])
async def test_planted_filters_never_run(repo, wt, planted, name):
    (repo / ".gitattributes").write_text(f"*.txt filter={name}\n")
    plain_git("add", ".gitattributes", cwd=repo)
    plain_git("commit", "--quiet", "-m", "attributes", cwd=repo)
    plain_git("config", f"filter.{name}.clean", planted.program("clean"), cwd=repo)
    plain_git("config", f"filter.{name}.smudge", planted.program("smudge"), cwd=repo)
    plain_git("config", f"filter.{name}.required", "true", cwd=repo)
    task = make_task()
    path = await wt.ensure(task)  # checkout: smudge
    (path / "notes.txt").write_text("one\nTWO\nthree\nfour\nfive\n")
    (path / "new.txt").write_text("raw content\n")
    sha = await wt.history.commit_all(task, "edit")  # add: clean
    await wt.changes.diff_stat(task)
    await wt.changes.diff(task)
    await wt.merges.merge(task, message="merge")  # checkout into the main checkout
    await wt.fingerprint()  # status
    assert (await wt.cleanup(task)).removed  # status
    assert planted.ran() == []
    assert plain_git("show", f"{sha}:new.txt", cwd=repo) == "raw content"
    (repo / "other.txt").write_text("control\n")
    plain_git("add", "other.txt", cwd=repo)
    assert "clean" in planted.ran()


async def test_a_planted_merge_driver_never_runs_and_the_merge_is_refused(repo, wt, planted):
    (repo / ".gitattributes").write_text("*.txt merge=evil\n")
    plain_git("add", ".gitattributes", cwd=repo)
    plain_git("commit", "--quiet", "-m", "attributes", cwd=repo)
    plain_git("config", "merge.evil.driver", f"{planted.program('driver')} %O %A %B", cwd=repo)
    task = make_task()
    path = await wt.ensure(task)
    (path / "notes.txt").write_text("ONE\ntwo\nthree\nfour\nfive\n")
    tip = await wt.history.commit_all(task, "task edit")
    (repo / "notes.txt").write_text("one\ntwo\nthree\nfour\nFIVE\n")
    plain_git("commit", "--quiet", "-am", "trunk edit", cwd=repo)
    before = plain_git("rev-parse", "HEAD", cwd=repo)
    with pytest.raises(MergeRefused, match=r"conflicts in notes\.txt"):
        await wt.merges.merge(task, message="merge")
    assert planted.ran() == []
    assert plain_git("rev-parse", "HEAD", cwd=repo) == before
    plain_git("merge", "--no-edit", tip, cwd=repo, check=False)
    assert planted.ran() == ["driver"]


async def test_a_planted_fsmonitor_never_runs(repo, wt, planted):
    task = make_task()
    path = await wt.ensure(task)
    plain_git("config", "core.fsmonitor", planted.program("fsmonitor"), cwd=path)
    await wt.ensure(task)
    (path / "feature.py").write_text("y = 1\n")
    await wt.history.commit_all(task, "feature")
    await wt.fingerprint()
    await wt.merges.merge(task, message="merge")
    assert (await wt.cleanup(task)).removed
    assert planted.ran() == []
    plain_git("status", cwd=repo)
    assert planted.ran() == ["fsmonitor"]


async def test_planted_textconv_and_external_diff_never_run(repo, wt, planted):
    (repo / ".gitattributes").write_text("*.txt diff=evil\n")
    plain_git("add", ".gitattributes", cwd=repo)
    plain_git("commit", "--quiet", "-m", "attributes", cwd=repo)
    plain_git("config", "diff.evil.textconv", planted.program("textconv"), cwd=repo)
    plain_git("config", "diff.evil.command", planted.program("command"), cwd=repo)
    plain_git("config", "diff.external", planted.program("external"), cwd=repo)
    plain_git("config", "core.pager", planted.program("pager"), cwd=repo)
    task = make_task()
    path = await wt.ensure(task)
    (path / "notes.txt").write_text("changed\n")
    await wt.history.commit_all(task, "edit")
    assert "+changed" in await wt.changes.diff(task)
    assert (await wt.changes.diff_stat(task)).files == ("notes.txt",)
    assert planted.ran() == []
    plain_git("diff", "trunk", "feat/T-1", cwd=repo)
    assert planted.ran()


async def test_worktree_add_runs_no_filter_the_new_worktrees_own_config_defines(
    repo, wt, planted, tmp_path
):
    """`includeIf "gitdir:**/worktrees/**"` applies in the new worktree, not in the main
    checkout: git's own checkout during `worktree add` would run its smudge filter."""
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    plain_git("add", ".gitattributes", cwd=repo)
    plain_git("commit", "--quiet", "-m", "attributes", cwd=repo)
    included = tmp_path / "worktrees.gitconfig"
    smudge, clean = planted.program("smudge"), planted.program("clean")
    included.write_text(
        f'[filter "evil"]\n\tsmudge = {smudge}\n\tclean = {clean}\n\trequired = true\n'
    )
    plain_git("config", "includeIf.gitdir:**/worktrees/**.path", str(included), cwd=repo)
    plain_git("config", "includeIf.onbranch:feat/**.path", str(included), cwd=repo)

    task = make_task()
    path = await wt.ensure(task)
    assert planted.ran() == []
    assert (path / "notes.txt").read_text() == "one\ntwo\nthree\nfour\nfive\n"
    assert await git("status", "--porcelain", cwd=path) == ""  # complete, and clean
    await wt.history.commit_all(task, "nothing")
    assert (await wt.cleanup(task)).removed
    assert planted.ran() == []
    # With plain git, the same `worktree add` runs it.
    plain_git("worktree", "add", "--quiet", str(tmp_path / "plain"), cwd=repo)
    assert "smudge" in planted.ran()


async def test_a_worktree_whose_git_file_is_gone_is_refused_not_taken_for_the_main_checkout(
    repo, wt
):
    """Without its `.git` file, git in the worktree finds the main checkout's repository:
    T25 would commit the main checkout there."""
    task = make_task()
    path = await wt.ensure(task)
    (path / ".git").unlink()
    (path / "feature.py").write_text("y = 1\n")
    with pytest.raises(T25Error, match="is not a worktree of"):
        await wt.history.commit_all(task, "feature")
    assert plain_git("status", "--porcelain", cwd=repo) == ""
