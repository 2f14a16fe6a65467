"""Task worktrees against real git repositories: create, adopt, refuse, lock, commit,
diff, clean up and merge, including the adversarial cases from testing.md."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.domain.models import DiffStat, Task, TaskType
from core.errors import MergeRefused, WorktreeBusy, WorktreeRefused
from core.workspace.task_trees import META_DIR
from core.workspace.worktrees import Worktrees
from tests.support import CHECKOUT
from tests.support.git import make_task, new_repo, plain_git, without_identity

PROJECT = CHECKOUT
NASTY_BRANCH = "tr$unk;touch${IFS}PWNED|`touch${IFS}PWNED`&'q'\"(x)!#>y<{z}"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return new_repo(tmp_path / "repo")


@pytest.fixture
def wt(repo: Path) -> Worktrees:
    return Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")


def head(cwd: Path, ref: str = "HEAD") -> str:
    return plain_git("rev-parse", ref, cwd=cwd)


# -- create, adopt, refuse -------------------------------------------------------------------


async def test_ensure_creates_the_task_worktree_from_the_default_branch(repo, wt):
    task = make_task()
    path = await wt.ensure(task)
    assert path == (repo / ".factory" / "worktrees" / "T-1").resolve()
    assert plain_git("symbolic-ref", "HEAD", cwd=path) == "refs/heads/feat/T-1"
    assert head(path) == head(repo, "trunk")
    record = json.loads((path.parent / META_DIR / "T-1.json").read_text())
    assert record["owner"] == "install-a" and record["branch"] == "feat/T-1"
    assert record["path"] == str(path) and record["created_at"]
    # The record lives outside the tree: the new worktree is spotless.
    assert plain_git("status", "--porcelain", "--ignored", cwd=path) == ""


async def test_ensure_names_the_branch_after_the_task_type(wt):
    path = await wt.ensure(make_task("T-2", TaskType.FIX))
    assert plain_git("symbolic-ref", "--short", "HEAD", cwd=path) == "fix/T-2"


async def test_ensure_twice_adopts_the_same_worktree(wt):
    task = make_task()
    path = await wt.ensure(task)
    (path / "work.py").write_text("x = 1\n")
    assert await wt.ensure(task) == path
    assert (path / "work.py").read_text() == "x = 1\n"


async def test_a_directory_git_does_not_list_is_refused(wt):
    stray = wt.path_for("T-1")
    stray.mkdir(parents=True)
    (stray / "precious.txt").write_text("mine")
    with pytest.raises(WorktreeRefused, match="no ownership record") as err:
        await wt.ensure(make_task())
    assert err.value.hint
    assert (stray / "precious.txt").read_text() == "mine"


async def test_a_forged_record_without_a_git_worktree_is_refused(wt):
    stray = wt.path_for("T-1")
    stray.mkdir(parents=True)
    record = {"owner": "install-a", "task_id": "T-1", "branch": "feat/T-1", "path": str(stray)}
    (stray.parent / META_DIR).mkdir()
    (stray.parent / META_DIR / "T-1.json").write_text(json.dumps(record))
    with pytest.raises(WorktreeRefused, match="does not list it"):
        await wt.ensure(make_task())


async def test_a_record_of_another_installation_is_refused(repo, wt):
    await wt.ensure(make_task())
    other = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-b")
    with pytest.raises(WorktreeRefused, match="owner is 'install-a', expected 'install-b'"):
        await other.ensure(make_task())
    # Nor may it commit in, clean up or merge someone else's tree.
    with pytest.raises(WorktreeRefused):
        await other.history.commit_all(make_task(), "hijack")
    kept = await other.cleanup(make_task())
    assert not kept.removed and "does not match" in kept.reason
    assert wt.path_for("T-1").is_dir()


async def test_a_worktree_switched_to_another_branch_is_not_adopted(wt):
    path = await wt.ensure(make_task())
    plain_git("switch", "--quiet", "-c", "elsewhere", cwd=path)
    with pytest.raises(WorktreeRefused, match="is on elsewhere, not on the task branch feat/T-1"):
        await wt.ensure(make_task())
    with pytest.raises(WorktreeRefused, match="elsewhere"):
        await wt.history.commit_all(make_task(), "wrong branch")


@pytest.mark.parametrize(
    "bad",
    [
        "..",
        "../escape",
        "T-1/../../x",
        "a/b",
        ".hidden",
        "",
        "T-1\n",
        "T 1",
        "x" * 65,
        "/abs",
        "T-1.lock",
    ],
)
async def test_unsafe_task_ids_are_refused_before_any_git_call(repo, wt, bad):
    with pytest.raises(WorktreeRefused, match="cannot name a worktree"):
        wt.path_for(bad)
    with pytest.raises(WorktreeRefused):
        await wt.ensure(make_task(bad))
    assert plain_git("worktree", "list", "--porcelain", cwd=repo).count("worktree ") == 1


async def test_a_symlinked_worktree_path_pointing_outside_is_refused(tmp_path, repo, wt):
    outside = tmp_path / "outside"
    outside.mkdir()
    link = wt.path_for("T-9").parent / "T-1"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorktreeRefused, match="symbolic link"):
        wt.path_for("T-1")
    with pytest.raises(WorktreeRefused, match="symbolic link"):
        await wt.ensure(make_task())
    assert list(outside.iterdir()) == []


async def test_a_symlinked_root_is_refused(tmp_path, repo):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".factory").mkdir()
    (repo / ".factory" / "worktrees").symlink_to(elsewhere, target_is_directory=True)
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    with pytest.raises(WorktreeRefused, match="through a symbolic link"):
        wt.path_for("T-1")
    with pytest.raises(WorktreeRefused, match="through a symbolic link"):
        await wt.ensure(make_task())
    assert list(elsewhere.iterdir()) == []


async def test_a_symlinked_parent_inside_the_repository_is_refused(tmp_path, repo):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".factory").symlink_to(elsewhere, target_is_directory=True)
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "trunk", owner="install-a")
    with pytest.raises(WorktreeRefused, match="through a symbolic link"):
        await wt.ensure(make_task())
    assert list(elsewhere.iterdir()) == []


async def test_a_root_outside_the_repository_works_but_not_through_a_link(tmp_path, repo):
    real = Worktrees(repo, tmp_path / "trees", "trunk", owner="install-a")
    path = await real.ensure(make_task())
    assert path == (tmp_path / "trees" / "T-1").resolve()
    (tmp_path / "linked").symlink_to(tmp_path / "trees", target_is_directory=True)
    linked = Worktrees(repo, tmp_path / "linked", "trunk", owner="install-a")
    with pytest.raises(WorktreeRefused, match="through a symbolic link"):
        linked.path_for("T-1")


async def test_a_missing_default_branch_is_refused(repo):
    wt = Worktrees(repo, repo / ".factory" / "worktrees", "main", owner="install-a")
    with pytest.raises(WorktreeRefused, match="default branch 'main'"):
        await wt.ensure(make_task())
    assert not (repo / ".factory" / "worktrees" / META_DIR / "T-1.json").exists()


async def test_a_listed_worktree_whose_directory_vanished_is_made_again_from_its_branch(wt):
    task = make_task()
    path = await wt.ensure(task)
    (path / "a.txt").write_text("committed\n")
    head = await wt.history.commit_all(task, "on the branch")
    os.rename(path, path.with_name("moved-away"))
    assert await wt.ensure(task) == path
    assert (path / "a.txt").read_text() == "committed\n"
    assert await wt.tip(task) == head


async def test_a_branch_name_full_of_shell_metacharacters_is_just_a_name(tmp_path):
    repo = new_repo(tmp_path / "repo", NASTY_BRANCH)
    wt = Worktrees(repo, repo / ".factory" / "worktrees", NASTY_BRANCH, owner="install-a")
    task = make_task()
    path = await wt.ensure(task)
    (path / "feature.py").write_text("x = 1\n")
    assert await wt.history.commit_all(task, "feature; rm -rf / $(touch PWNED)")
    assert (await wt.changes.diff_stat(task)).files == ("feature.py",)
    sha = await wt.merges.merge(task, message="merge `touch PWNED`")
    assert head(repo, f"refs/heads/{NASTY_BRANCH}") == sha
    assert (await wt.cleanup(task)).removed
    assert not list(tmp_path.rglob("PWNED")) and not (PROJECT / "PWNED").exists()


# -- one driver per worktree ------------------------------------------------------------------

LOCK_HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from core.workspace.worktrees import Worktrees
    wt = Worktrees(Path(sys.argv[1]), Path(sys.argv[2]), "trunk", owner="install-a")
    with wt.lock("T-1"):
        print("locked", flush=True)
        sys.stdin.read()  # hold it until the test closes our stdin
""")

RACER = textwrap.dedent("""
    import asyncio, sys, time
    from datetime import datetime, timezone
    from pathlib import Path
    from core.domain.models import Task, TaskType
    from core.errors import WorktreeBusy
    from core.workspace.worktrees import Worktrees
    wt = Worktrees(Path(sys.argv[1]), Path(sys.argv[2]), "trunk", owner="install-a")
    now = datetime.now(timezone.utc)
    task = Task(id="T-1", project="demo", title="t", type=TaskType.FEAT,
                created_at=now, state_since=now)
    while not Path(sys.argv[3]).exists():
        time.sleep(0.001)
    try:
        print("ok", asyncio.run(wt.ensure(task)))
    except WorktreeBusy as exc:
        print("busy", exc)
""")


def spawn(script: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=PROJECT,
        text=True,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        **kw,
    )


async def test_a_worktree_locked_by_another_process_is_busy_naming_its_pid(repo, wt):
    holder = spawn(LOCK_HOLDER, str(repo), str(wt.root), stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(WorktreeBusy, match=f"pid {holder.pid}"):
            wt.lock("T-1").acquire()
        with pytest.raises(WorktreeBusy, match=f"another T25 process \\(pid {holder.pid}\\)"):
            await wt.ensure(make_task())
        with pytest.raises(WorktreeBusy):
            await wt.cleanup(make_task())
    finally:
        holder.communicate(input="", timeout=30)  # closes its stdin: it lets go and exits
    # The lock ends with its holder.
    assert (await wt.ensure(make_task())).is_dir()


async def test_the_lock_is_exclusive_within_a_process_too(wt):
    with wt.lock("T-1"):
        with pytest.raises(WorktreeBusy, match="already locked by this process"):
            wt.lock("T-1").acquire()
        # Work done while holding it does not trip over its own lock.
        assert (await wt.ensure(make_task())).is_dir()
    with wt.lock("T-1"):
        pass


async def test_racing_processes_create_the_worktree_once(tmp_path, repo, wt):
    go = tmp_path / "go"
    racers = [spawn(RACER, str(repo), str(wt.root), str(go)) for _ in range(4)]
    go.touch()
    results = [r.communicate(timeout=60)[0].strip() for r in racers]
    assert all(r.startswith(("ok ", "busy ")) for r in results), results
    assert any(r.startswith("ok ") for r in results)
    assert all("another T25 process (pid" in r for r in results if r.startswith("busy"))
    listed = plain_git("worktree", "list", "--porcelain", cwd=repo)
    assert listed.count(f"worktree {wt.path_for('T-1')}\n") == 1
    assert await wt.ensure(make_task()) == wt.path_for("T-1")


async def test_a_half_written_worktree_entry_is_waited_out(tmp_path, repo, wt):
    """The state another process's `git worktree add` leaves for a moment: an entry of
    .git/worktrees whose commondir is still empty. `git worktree list` dies on it; T25
    lists again after a pause, and adopts the worktree once the entry is whole."""
    task = make_task()
    path = await wt.ensure(task)
    entry = Path(plain_git("rev-parse", "--absolute-git-dir", cwd=repo)) / "worktrees" / "half"
    entry.mkdir()
    (entry / "gitdir").write_text(f"{tmp_path / 'half' / '.git'}\n")
    (entry / "commondir").write_text("")
    with pytest.raises(subprocess.CalledProcessError):
        plain_git("worktree", "list", "--porcelain", "-z", cwd=repo)
    finished = asyncio.get_running_loop().call_later(
        0.3, (entry / "commondir").write_text, "../..\n"
    )
    try:
        assert await wt.ensure(task) == path
    finally:
        finished.cancel()


# Another process adding worktrees: git writes a new entry of .git/worktrees file by file,
# and `git worktree list` dies on one whose commondir is still empty.
CREATOR = 'for i in $(seq 1 "$2"); do git worktree add -q --detach "$1-$i" trunk; done'


async def test_adopting_a_worktree_survives_other_processes_adding_theirs(tmp_path, repo, wt):
    """`git worktree list` fails ("failed to read .git/worktrees/<name>/commondir") while
    another process is creating a worktree; adopting one lists them, and tries again."""
    tasks = [make_task(f"T-{n}") for n in range(1, 5)]
    paths = [await wt.ensure(task) for task in tasks]
    creators = [
        await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            CREATOR,
            "creator",
            str(tmp_path / f"other{n}"),
            "15",
            cwd=repo,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for n in range(4)
    ]
    adopted = 0
    try:
        while any(c.returncode is None for c in creators) and adopted < 400:
            assert await asyncio.gather(*(wt.ensure(task) for task in tasks)) == paths
            adopted += 1
    finally:
        await asyncio.wait_for(asyncio.gather(*(c.wait() for c in creators)), 120)
    assert adopted > 0


async def test_a_planted_symlink_in_place_of_the_lock_file_is_not_followed(tmp_path, wt):
    victim = tmp_path / "victim.txt"
    victim.write_text("do not truncate")
    meta = wt.path_for("T-1").parent / META_DIR
    meta.mkdir(parents=True)
    (meta / "T-1.lock").symlink_to(victim)
    with pytest.raises(WorktreeRefused, match="cannot open the lock file"):
        wt.lock("T-1").acquire()
    assert victim.read_text() == "do not truncate"


# -- commit and measure -----------------------------------------------------------------------


async def test_commit_all_commits_what_the_agent_changed_and_diff_stat_counts_it(repo, wt):
    task = make_task()
    path = await wt.ensure(task)
    assert await wt.history.commit_all(task, "nothing yet") is None
    (path / "app.py").write_text("def hello():\n    return 'hello'\n\n\ndef bye():\n    pass\n")
    (path / "new.py").write_text("a = 1\nb = 2\nc = 3\n")
    (path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (path / "debug.log").write_text("ignored by .gitignore\n")
    sha = await wt.history.commit_all(task, "T-1: greet and leave")
    assert sha == head(repo, "refs/heads/feat/T-1")
    assert plain_git("log", "-1", "--format=%an|%s", sha, cwd=repo) == (
        "Test Operator|T-1: greet and leave"
    )
    assert plain_git("ls-tree", "--name-only", sha, cwd=repo).split() == [
        ".gitignore",
        "app.py",
        "logo.png",
        "new.py",
    ]
    stat = await wt.changes.diff_stat(task)
    assert stat == DiffStat(files=("app.py", "logo.png", "new.py"), added=8, deleted=1)
    text = await wt.changes.diff(task)
    assert "+++ b/new.py" in text and "-    return 'hi'" in text and "Binary files" in text
    assert await wt.history.commit_all(task, "again") is None


async def test_diff_is_measured_from_the_merge_base_not_the_moving_default_branch(repo, wt):
    task = make_task()
    path = await wt.ensure(task)
    (path / "mine.py").write_text("x = 1\n")
    await wt.history.commit_all(task, "mine")
    (repo / "theirs.py").write_text("y = 2\ny = 3\n")
    plain_git("add", "theirs.py", cwd=repo)
    plain_git("commit", "--quiet", "-m", "trunk moves on", cwd=repo)
    assert await wt.changes.diff_stat(task) == DiffStat(files=("mine.py",), added=1, deleted=0)


async def test_a_rename_counts_as_one_file_and_keeps_its_old_name(wt):
    task = make_task()
    path = await wt.ensure(task)
    os.rename(path / "app.py", path / "greeting.py")
    await wt.history.commit_all(task, "rename")
    stat = await wt.changes.diff_stat(task)
    assert stat == DiffStat(files=("greeting.py",), renamed_from=("app.py",), added=0, deleted=0)
    assert stat.touched == ("greeting.py", "app.py")  # a protected path renamed away counts


async def test_a_deletion_a_rename_and_a_binary_file_are_each_counted_once(repo, wt):
    (repo / "old.py").write_text("x = 1\ny = 2\nz = 3\n")
    (repo / "gone.py").write_text("gone = True\n")
    plain_git("add", "old.py", "gone.py", cwd=repo)
    plain_git("commit", "-q", "-m", "two files", cwd=repo)
    task = make_task()
    path = await wt.ensure(task)
    os.rename(path / "old.py", path / "new.py")
    (path / "gone.py").unlink()
    (path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    await wt.history.commit_all(task, "rename, delete, add")

    stat = await wt.changes.diff_stat(task)

    assert stat == DiffStat(
        files=("gone.py", "logo.png", "new.py"),
        renamed_from=("old.py",),
        removed=("gone.py",),
        added=0,
        deleted=1,
    )


async def test_manifests_are_read_at_both_ends_of_the_task_branch(wt, repo):
    (repo / "requirements.txt").write_text("requests\n")
    plain_git("add", "requirements.txt", cwd=repo)
    plain_git("commit", "-q", "-m", "requirements", cwd=repo)
    task = make_task()
    path = await wt.ensure(task)
    (path / "requirements.txt").write_text("requests\nrich\n")
    (path / "package.json").write_text('{"dependencies": {"left-pad": "1"}}')
    (path / "Cargo.toml").write_bytes(b"\xff\xfe not text")
    await wt.history.commit_all(task, "dependencies")
    got = await wt.changes.manifests(task, ["Cargo.toml", "package.json", "requirements.txt"])
    assert [(m.path, m.before, m.after) for m in got] == [
        ("Cargo.toml", None, None),  # not UTF-8: unread
        ("package.json", None, '{"dependencies": {"left-pad": "1"}}'),
        ("requirements.txt", "requests\n", "requests\nrich\n"),
    ]


async def test_commit_all_uses_t25_identity_when_the_repository_has_none(
    tmp_path, monkeypatch, repo, wt
):
    without_identity(repo, tmp_path / "empty-home", monkeypatch)
    task = make_task()
    path = await wt.ensure(task)
    (path / "x.py").write_text("x = 1\n")
    sha = await wt.history.commit_all(task, "by T25")
    assert plain_git("log", "-1", "--format=%an <%ae>|%cn <%ce>", sha, cwd=repo) == (
        "T25 <t25@localhost>|T25 <t25@localhost>"
    )


# -- cleanup ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make_dirt", "expected"),
    [
        (lambda p: (p / "app.py").write_text("changed\n"), "1 uncommitted file(s): app.py"),
        (lambda p: (p / "notes.md").write_text("draft\n"), "1 untracked file(s): notes.md"),
        (lambda p: (p / "build.log").write_text("output\n"), "1 ignored file(s): build.log"),
    ],
)
async def test_cleanup_keeps_a_tree_with_anything_that_could_be_lost(wt, make_dirt, expected):
    task = make_task()
    path = await wt.ensure(task)
    make_dirt(path)
    kept = await wt.cleanup(task)
    assert not kept.removed
    assert expected in kept.reason and str(path) in kept.reason
    assert path.is_dir() and await wt.ensure(task) == path


async def test_cleanup_names_every_kind_of_change_at_once(wt):
    task = make_task()
    path = await wt.ensure(task)
    (path / "app.py").write_text("changed\n")
    (path / ".gitignore").write_text("*.log\n*.tmp\n")
    (path / "a.md").write_text("a")
    for i in range(6):
        (path / f"out{i}.log").write_text("x")
    kept = await wt.cleanup(task)
    assert "2 uncommitted, 1 untracked, 6 ignored file(s): .gitignore, app.py, a.md" in kept.reason
    assert "… and 4 more" in kept.reason


async def test_cleanup_removes_a_clean_tree_and_keeps_the_branch(repo, wt):
    task = make_task()
    path = await wt.ensure(task)
    (path / "done.py").write_text("done = True\n")
    sha = await wt.history.commit_all(task, "done")
    result = await wt.cleanup(task)
    assert result.removed and "branch feat/T-1 kept" in result.reason
    assert not path.exists()
    assert str(path) not in plain_git("worktree", "list", "--porcelain", cwd=repo)
    assert head(repo, "refs/heads/feat/T-1") == sha
    assert not (path.parent / META_DIR / "T-1.json").exists()
    assert not (await wt.cleanup(task)).removed
    # A retry checks the kept branch out again, work included.
    again = await wt.ensure(task)
    assert (again / "done.py").read_text() == "done = True\n"


async def test_cleanup_never_forces_a_tree_git_has_locked(repo, wt):
    task = make_task()
    path = await wt.ensure(task)
    plain_git("worktree", "lock", "--reason", "on a USB disk", str(path), cwd=repo)
    kept = await wt.cleanup(task)
    assert not kept.removed and "git has it locked (on a USB disk)" in kept.reason
    assert path.is_dir()


async def test_cleanup_leaves_a_tree_it_does_not_own(wt):
    stray = wt.path_for("T-1")
    stray.mkdir(parents=True)
    kept = await wt.cleanup(make_task())
    assert not kept.removed and "no ownership record" in kept.reason
    assert stray.is_dir()


# -- merge -----------------------------------------------------------------------------------


async def _task_with_commit(wt: Worktrees, name: str = "feature.py") -> Task:
    task = make_task()
    path = await wt.ensure(task)
    (path / name).write_text("feature = True\n")
    await wt.history.commit_all(task, "T-1: feature")
    return task


async def test_merge_makes_a_no_ff_merge_commit_with_both_parents(repo, wt):
    task = await _task_with_commit(wt)
    before, tip = head(repo), head(repo, "refs/heads/feat/T-1")
    sha = await wt.merges.merge(task, message="Merge T-1: feature")
    assert head(repo) == sha == head(repo, "refs/heads/trunk")
    parents = plain_git("rev-list", "--parents", "-n", "1", sha, cwd=repo).split()
    assert parents == [sha, before, tip]
    assert plain_git("log", "-1", "--format=%s", cwd=repo) == "Merge T-1: feature"
    assert plain_git("symbolic-ref", "--short", "HEAD", cwd=repo) == "trunk"
    assert (repo / "feature.py").read_text() == "feature = True\n"
    assert plain_git("status", "--porcelain", cwd=repo) == ""
    plain_git("merge-base", "--is-ancestor", before, sha, cwd=repo)  # history intact


async def test_a_trial_merge_leaves_the_default_branch_until_it_lands_and_no_tree_after(repo, wt):
    task = await _task_with_commit(wt)
    before = head(repo)
    trial = await wt.merges.trial_merge(task, message="Merge T-1: feature")
    assert head(repo) == before  # nothing moved yet
    assert (trial.path / "feature.py").read_text() == "feature = True\n"  # the merge result
    assert plain_git("rev-parse", "HEAD", cwd=trial.path) == trial.commit
    assert await wt.merges.land(trial) == trial.commit == head(repo, "refs/heads/trunk")
    await wt.merges.discard(trial)
    assert not trial.path.exists()
    assert str(trial.path) not in plain_git("worktree", "list", cwd=repo)


async def test_a_default_branch_that_moved_during_the_trial_is_left_where_it_is(repo, wt):
    task = await _task_with_commit(wt)
    trial = await wt.merges.trial_merge(task, message="merge")
    (repo / "other.py").write_text("x = 1\n")
    plain_git("add", "other.py", cwd=repo)
    plain_git("commit", "--quiet", "-m", "meanwhile", cwd=repo)
    moved = head(repo)
    with pytest.raises(MergeRefused, match=r"trunk moved from .* while the merge was tried"):
        await wt.merges.land(trial)
    await wt.merges.discard(trial)
    assert head(repo) == moved


async def test_a_directory_in_the_way_of_a_trial_is_never_deleted(repo, wt):
    task = await _task_with_commit(wt)
    planted = wt.root / ".merge" / task.id
    planted.mkdir(parents=True)
    (planted / "someone's.txt").write_text("keep me\n")
    before = head(repo)
    with pytest.raises(MergeRefused, match="in the way of the merge's trial worktree"):
        await wt.merges.merge(task, message="merge")
    assert (planted / "someone's.txt").read_text() == "keep me\n"
    assert head(repo) == before


async def test_merge_is_refused_when_the_main_checkout_is_dirty(repo, wt):
    task = await _task_with_commit(wt)
    before = head(repo)
    (repo / "app.py").write_text("half-done edit\n")
    with pytest.raises(
        MergeRefused, match=r"uncommitted changes to 1 tracked file\(s\): app.py"
    ) as err:
        await wt.merges.merge(task, message="merge")
    assert err.value.hint
    assert head(repo) == before and (repo / "app.py").read_text() == "half-done edit\n"


async def test_merge_is_refused_when_the_main_checkout_is_on_another_branch(repo, wt):
    task = await _task_with_commit(wt)
    plain_git("switch", "--quiet", "-c", "hotfix", cwd=repo)
    with pytest.raises(MergeRefused, match="on hotfix, not on trunk"):
        await wt.merges.merge(task, message="merge")
    assert head(repo, "refs/heads/trunk") == head(repo, "refs/heads/hotfix")


async def test_merge_is_refused_when_the_branch_has_nothing_new(repo, wt):
    task = make_task()
    await wt.ensure(task)
    with pytest.raises(MergeRefused, match="no commits beyond trunk"):
        await wt.merges.merge(task, message="merge")
    with pytest.raises(MergeRefused, match="does not exist"):
        await wt.merges.merge(make_task("T-404"), message="merge")


async def test_a_conflicting_merge_changes_nothing_and_names_the_files(repo, wt):
    task = make_task()
    path = await wt.ensure(task)
    (path / "app.py").write_text("def hello():\n    return 'from the task'\n")
    await wt.history.commit_all(task, "task edit")
    (repo / "app.py").write_text("def hello():\n    return 'from trunk'\n")
    plain_git("commit", "--quiet", "-am", "trunk edit", cwd=repo)
    before = head(repo)
    with pytest.raises(MergeRefused, match=r"conflicts in app\.py; trunk is unchanged"):
        await wt.merges.merge(task, message="merge")
    assert head(repo) == before
    assert plain_git("status", "--porcelain", cwd=repo) == ""
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert (repo / "app.py").read_text() == "def hello():\n    return 'from trunk'\n"


async def test_a_merge_over_an_untracked_or_ignored_file_is_refused_naming_it(repo, wt):
    """git itself refused an untracked file only at the fast-forward, after the checks, and
    overwrites an ignored one unasked: T25 refuses both before the trial."""
    task = await _task_with_commit(wt, "feature.py")
    (repo / "feature.py").write_text("an untracked file the merge would overwrite\n")
    before = head(repo)
    with pytest.raises(
        MergeRefused,
        match=r"would write over 1 file\(s\) of the main checkout that git does not track: "
        r"feature\.py",
    ):
        await wt.merges.merge(task, message="merge")
    assert head(repo) == before
    assert (repo / "feature.py").read_text() == "an untracked file the merge would overwrite\n"
    (repo / ".git" / "info" / "exclude").write_text("feature.py\n")  # ignored: the same
    with pytest.raises(MergeRefused, match=r"feature\.py"):
        await wt.merges.merge(task, message="merge")
    assert (repo / "feature.py").read_text() == "an untracked file the merge would overwrite\n"


async def test_a_fingerprint_waits_out_another_process_half_way_through_adding_a_worktree(repo, wt):
    """Another worker's `git worktree add` writes its entry file by file; `git status` in
    the main checkout meanwhile dies on the missing commondir. Read again, not failed."""
    ghost = repo / ".factory" / "worktrees" / "T-99"
    ghost.mkdir(parents=True)
    entry = repo / ".git" / "worktrees" / "T-99"
    entry.mkdir(parents=True)
    (ghost / ".git").write_text(f"gitdir: {entry}\n")
    (entry / "HEAD").write_text("ref: refs/heads/trunk\n")
    (entry / "commondir").write_text("")  # created, not written yet

    async def finish_writing() -> None:
        # not a wait: the other process half way this long; a later fingerprint passes too
        await asyncio.sleep(0.3)
        (entry / "commondir").write_text("../..\n")
        (entry / "gitdir").write_text(f"{ghost / '.git'}\n")

    finishing = asyncio.create_task(finish_writing())
    print_ = await wt.fingerprint()
    await finishing
    assert print_.head_sha == head(repo)
