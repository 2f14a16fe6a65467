"""Task worktrees: the deliberately paranoid part of T25.

Every task gets a git worktree of its own at `<root>/<task id>`, on branch `<type>/<id>`,
created from the repository's default branch. Agents work there and nowhere else; T25
commits what they changed, measures the diff, cleans up after a merge or archive, and
merges into the main checkout only when a human asks.

The decisions, and the attack each one answers:

* **Paths.** A task id must be a plain name (no `/`, no `..`, no leading `.`), and the
  path is checked to resolve inside the configured root on every use. The root itself must
  be reached without a symbolic link (below the repository, or at its last component when
  it lives elsewhere), so a link planted at `.factory/worktrees` or `<root>/<id>` cannot send
  a worktree, its removal or its metadata somewhere else.
* **Ownership.** A directory that merely sits at the right path is never trusted. T25
  writes an ownership record at creation, outside the worktree (`<root>/.meta/<id>.json`,
  so it is never an untracked file in the tree and never blocks cleanup), and adopts or
  touches a worktree only if the record matches this installation, task, branch and path,
  `git worktree list` still lists the path on the task's branch, and the directory's git
  repository is this one.
* **One driver per worktree.** `flock` on `<root>/.meta/<id>.lock`, holding the pid.
  The kernel drops the lock when its process dies, so a crash leaves no stale lock. The
  lock file is never deleted: deleting it would let two processes lock two different
  files of the same name.
* **Cleanup never loses work.** A tree with uncommitted, untracked or *ignored* files is
  kept, and the reason names them (`git worktree remove` alone would delete ignored files);
  only what tools make again (`worktrees.caches`, core.workspace.caches) goes with the tree.
  A dry run is the same decision, said and not done.
  Removal is `git worktree remove` without `--force`; nothing here ever deletes a tree
  itself, but for a checked-out submodule git would refuse to remove, once it is found to
  hold its recorded commit and nothing else (core.workspace.submodules). The branch is kept. The forced removals are git's, of a tree T25 has just added
  and could not check out (empty, nobody's work) and of a merge's trial tree that git lists
  as a worktree (T25's own commit and what the checks left); never of a tree cleanup is
  asked to remove, and never of a directory git does not list.
* **Merge is the only write to the main checkout**, and it is a human action. The merge
  commit (`--no-ff`: the default branch's head and the reviewed commit as parents) is made
  by `git merge-tree` on no branch and checked out in a trial worktree (`<root>/.merge/<id>`)
  where the QA checks run on it; only then does the default branch move, by fast-forward
  to that tested commit: never forced, never rewriting history. Refused with the reason,
  nothing changed, when the checkout is elsewhere or dirty, the branch is empty or moved
  since review, the merge conflicts, or the default branch moved during the trial.
* **No planted program runs.** Every git call goes through `core.workspace.git`, which switches off
  hooks, fsmonitor, filters, merge drivers, external diff, textconv, pagers and signing; Git
  LFS's filter alone runs, as git-lfs's own binary (core.workspace.lfs_filter).
* **Repository shapes.** Submodules are checked out from the main checkout's own copies and
  a change inside one is refused (core.workspace.submodules); the worktree follows the main
  checkout's sparse cone and a change outside it is refused (core.workspace.sparse).

The fingerprint of the main checkout, which proves no agent wrote it, is `core.workspace.fingerprint`.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import re
import shutil
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.config.caches import DEFAULT_CACHES
from core.domain.backoff import Backoff, retry
from core.domain.manifests import MAX_MANIFEST_CHARS, ManifestChange
from core.domain.models import CheckResult, DiffStat, Task
from core.errors import GitError, MergeRefused, T25Error, WorktreeBusy, WorktreeRefused
from core.workspace import lfs, sparse, submodules
from core.workspace.caches import Leftovers, drop_untracked, sort_leftovers
from core.workspace.fingerprint import (
    ARCHIVE_REF,
    LANDED_REF,
    LEFTOVERS_REF,
    SNAPSHOTS_REF,
    Fingerprint,
    fingerprint,
)
from core.workspace.git import (
    Completed,
    default_branch,
    git,
    git_bytes,
    holds_branch,
    listed,
    merge_tree,
    run_git,
    status_entries,
)
from core.workspace.in_the_way import untracked_in_the_way
from core.workspace.lfs_filter import INSTALL_HINT
from core.workspace.ownership import matches, read_record, write_record
from core.workspace.push_settings import read_push_settings
from core.workspace.watch import Watch, Watched

if TYPE_CHECKING:
    from core.config.schema import Config

log = logging.getLogger("t25.worktrees")

META_DIR = ".meta"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's tree with nothing in it
TRIAL_DIR = ".merge"  # trial worktrees of merges: <root>/.merge/<task id>
T25_IDENTITY = ("T25", "t25@localhost")
# Plain names only: no separator, no dot at all (so no `..`, no hidden names, and
# `<id>.json` / `<id>.lock` can never collide), bounded length.
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_SHOWN = 5  # file names quoted in a refusal before "… and N more"
# `git worktree add` writes a new entry of the repository's admin directory (.git/worktrees)
# file by file, and git reading the entries meanwhile (`worktree list`, another `worktree
# add`) dies on its still-empty commondir: "failed to read .git/worktrees/<name>/commondir".
# Such a call is made again after these pauses (1.75 s in all).
HALF_WRITTEN = "failed to read"
ADMIN_RACE = Backoff(0.05, 0.5)
ADMIN_RACE_RETRIES = 6


@dataclass(frozen=True)
class TrialMerge:
    """A merge made but not landed: the commit the default branch would move to, checked
    out in a worktree of its own (`path`) for the QA checks."""

    task_id: str
    branch: str
    commit: str  # the merge commit: parents `base` and `tip`, on no branch
    base: str  # the default branch's head it was made on
    tip: str  # the task branch's head it merges
    path: Path | None  # None: a merge the default branch already holds (core.control.merge_record)
    checks: tuple[CheckResult, ...] = ()  # what `qa.checks` gave on it (core.workspace.merging)


@dataclass(frozen=True)
class Cleanup:
    """The outcome of a cleanup: whether the tree was removed, and why (not). In a dry run
    (`dry_run`), whether it would be: the same decision, nothing done."""

    removed: bool
    reason: str
    dry_run: bool = False


# -- the per-process lock -----------------------------------------------------------------

# Lock files this process holds, with the pid that took them: a child made by fork()
# inherits this dict but not the right to act as the holder.
_HELD: dict[str, int] = {}
_HELD_GUARD = threading.Lock()


class WorktreeLock:
    """An exclusive, non-blocking lock on one task's worktree, across processes.

    Use as a context manager. A second process (or a second attempt in this one) gets
    `WorktreeBusy` naming the pid that holds it; nobody waits on a busy worktree.
    """

    def __init__(self, path: Path, task_id: str) -> None:
        self.path = path
        self.task_id = task_id
        self._fd: int | None = None

    @property
    def held_here(self) -> bool:
        return _HELD.get(str(self.path)) == os.getpid()

    def acquire(self) -> WorktreeLock:
        key = str(self.path)
        with _HELD_GUARD:
            if self.held_here:
                raise WorktreeBusy(
                    f"the worktree of {self.task_id} is already locked by this process "
                    f"(pid {os.getpid()})",
                    hint="finish the work that holds it first",
                )
            # O_NOFOLLOW: a planted symlink cannot make us create or truncate another file.
            # O_CLOEXEC: an agent started while we hold the lock must not inherit it.
            try:
                fd = os.open(
                    self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
            except OSError as exc:  # ELOOP: someone put a link where the lock file goes
                raise WorktreeRefused(
                    f"cannot open the lock file {self.path}: {exc.strerror}",
                    hint=f"remove {self.path}; T25 recreates it",
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise WorktreeBusy(
                    f"the worktree of {self.task_id} is being driven by another T25 process "
                    f"(pid {holder})",
                    hint="wait for it to finish, or stop that process; its lock ends with it",
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._fd = fd
            _HELD[key] = os.getpid()
        return self

    def release(self) -> None:
        with _HELD_GUARD:
            if self._fd is None:
                return
            _HELD.pop(str(self.path), None)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WorktreeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


# -- worktrees -------------------------------------------------------------------------------


class Worktrees:
    """Create, adopt, commit in, diff, clean up and merge task worktrees of one repository.

    `repo` is the main checkout, `root` the configured worktree root, `owner` a stable
    identity of this T25 installation, written into every ownership record.
    """

    def __init__(
        self,
        repo: Path,
        root: Path,
        default_branch: str,
        *,
        owner: str,
        former: Sequence[str] = (),
        caches: Sequence[str] = DEFAULT_CACHES,
    ) -> None:
        if not owner:
            raise ValueError("owner must identify this T25 installation")
        if not default_branch:
            raise ValueError("default_branch is required")
        # Lexical absolute paths (no symlink resolution yet): resolving is what `_real_root`
        # checks, every time, so a link planted later is still caught.
        self.repo = Path(os.path.abspath(repo))
        self.root = Path(os.path.abspath(root))
        self.default_branch = default_branch
        self.owner = owner
        self.former = tuple(former)  # names it went by before (core.workspace.ownership)
        self.caches = tuple(caches)  # what a cleanup disregards (core.workspace.caches)
        self._common_dir: Path | None = None
        self._admin = asyncio.Lock()  # see _create
        self.watch = Watch(self.repo)  # the runs going on (core.workspace.watch)
        # Read before any run of this process: where PR_OPEN pushes (push_settings.py).
        self.push_settings = read_push_settings(self.repo)

    # -- paths and records

    def path_for(self, task_id: str) -> Path:
        """`<root>/<task_id>`, refused unless it resolves directly inside the root."""
        if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
            raise WorktreeRefused(
                f"{task_id!r} cannot name a worktree: a task id is letters, digits, '-' and '_'",
                hint="task ids look like T-7",
            )
        root = self._real_root()
        path = root / task_id
        if path.is_symlink() or path.resolve() != path:
            raise WorktreeRefused(
                f"{path} is a symbolic link (to {os.path.realpath(path)}); T25 never follows "
                "one out of the worktree root",
                hint=f"remove the link {path}, then try again",
            )
        return path

    def _real_root(self) -> Path:
        """The root, resolved, after checking no symlink stands between it and its anchor
        (the repository when the root is inside it, else the root's parent directory)."""
        anchor = self.repo if self.root.is_relative_to(self.repo) else self.root.parent
        expected = anchor.resolve() / self.root.relative_to(anchor)
        real = self.root.resolve()
        if real != expected:
            raise WorktreeRefused(
                f"the worktree root {self.root} leads to {real} through a symbolic link",
                hint="point worktrees.root at a real directory, or remove the link",
            )
        return real

    def _meta_dir(self) -> Path:
        root = self._real_root()
        meta = root / META_DIR
        meta.mkdir(parents=True, exist_ok=True)
        if meta.is_symlink() or not meta.is_dir() or self._real_root() != root:
            raise WorktreeRefused(
                f"{meta} is not a plain directory inside the worktree root",
                hint=f"remove {meta}; T25 recreates it",
            )
        return meta

    def _lock_path(self, task_id: str) -> Path:
        self.path_for(task_id)
        return self._meta_dir() / f"{task_id}.lock"

    def _record_path(self, task_id: str) -> Path:
        return self._meta_dir() / f"{task_id}.json"

    def _record_for(self, task: Task, path: Path) -> dict[str, str]:
        return {"owner": self.owner, "task_id": task.id, "branch": task.branch, "path": str(path)}

    def _read_record(self, task_id: str) -> dict[str, object] | None:
        return read_record(self._record_path(task_id))

    def _write_record(self, task: Task, path: Path) -> None:
        body = {**self._record_for(task, path), "created_at": datetime.now(UTC).isoformat()}
        write_record(self._record_path(task.id), {**body, "version": 1})

    # -- locking

    def lock(self, task_id: str) -> WorktreeLock:
        """The exclusive lock on one task's worktree; enter it to hold it."""
        return WorktreeLock(self._lock_path(task_id), task_id)

    @contextmanager
    def _working_on(self, task_id: str) -> Iterator[None]:
        """Hold the task's lock for one operation, unless this process already holds it."""
        lock = self.lock(task_id)
        if lock.held_here:
            yield
            return
        with lock:
            yield

    # -- what git says

    async def _listing(self) -> dict[Path, dict[str, str]]:
        """`git worktree list --porcelain -z`, keyed by resolved path."""
        raw = await retry(
            lambda _: git_bytes("worktree", "list", "--porcelain", "-z", cwd=self.repo),
            pauses=ADMIN_RACE.pauses(ADMIN_RACE_RETRIES),
            transient=_met_half_written_entry,
        )
        out: dict[Path, dict[str, str]] = {}
        entry: dict[str, str] = {}
        for line in os.fsdecode(raw).split("\0"):
            if line:
                key, _, value = line.partition(" ")
                entry[key] = value
            elif entry:
                out[Path(entry["worktree"]).resolve()] = entry
                entry = {}
        return out

    async def _rev(self, ref: str, cwd: Path | None = None) -> str | None:
        sha = await git(
            "rev-parse",
            "--quiet",
            "--verify",
            f"{ref}^{{commit}}",
            cwd=cwd or self.repo,
            check=False,
        )
        return sha or None

    async def _git_common_dir(self, cwd: Path) -> Path:
        out = await git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=cwd)
        return Path(out).resolve()

    async def _verify(self, task: Task, path: Path, *, on_branch: bool = True) -> None:
        """Refuse unless `path` is this installation's worktree for `task`, as T25 made it
        (and, `on_branch`, still on the task's branch)."""
        record = self._read_record(task.id)
        if record is None:
            raise WorktreeRefused(
                f"{path} exists but T25 has no ownership record for it",
                hint="T25 adopts only worktrees it created: move that directory away, then retry",
            )
        for key, want in self._record_for(task, path).items():
            if not matches(key, record.get(key), want, self.former):
                raise WorktreeRefused(
                    f"the ownership record of {path} does not match: {key} is "
                    f"{record.get(key)!r}, expected {want!r}",
                    hint="another T25 installation or task owns it; leave it or remove it yourself",
                )
        entry = (await self._listing()).get(path)
        if entry is None:
            raise WorktreeRefused(
                f"{path} exists but `git worktree list` does not list it",
                hint="it is not a worktree of this repository; move it away, then retry",
            )
        if not path.is_dir():
            raise WorktreeRefused(
                f"git lists {path} as a worktree but the directory is gone",
                hint=f"restore it, or run `git worktree prune` in {self.repo}, then retry",
            )
        if not on_branch:
            return
        if entry.get("branch") != f"refs/heads/{task.branch}":
            now = entry.get("branch", "a detached HEAD").removeprefix("refs/heads/")
            raise WorktreeRefused(
                f"{path} is on {now}, not on the task branch {task.branch}",
                hint=f"switch it back (git -C {path} switch {task.branch}), or clean it up",
            )
        # A `.git` file rewritten (or removed, so that git finds the main checkout's
        # repository) would send T25's git calls in the worktree elsewhere.
        out = await git("rev-parse", "--path-format=absolute", "--git-dir", cwd=path)
        used = Path(out).resolve()
        if used != await self._admin_dir(path):
            raise WorktreeRefused(
                f"{path} is not a worktree of {self.repo}: git there uses {used}",
                hint="move it away, then retry",
            )

    async def _admin_dir(self, path: Path) -> Path:
        """The worktree's entry in the repository (`<common dir>/worktrees/<name>`), found
        from the repository's side: the one whose `gitdir` names `path`."""
        if self._common_dir is None:
            self._common_dir = await self._git_common_dir(self.repo)
        entries = self._common_dir / "worktrees"
        for entry in sorted(entries.iterdir()) if entries.is_dir() else ():
            try:
                named = (entry / "gitdir").read_text(encoding="utf-8").strip()
            except OSError:
                continue
            if Path(named) == path / ".git":
                return entry.resolve()
        raise WorktreeRefused(
            f"the repository has no worktree entry for {path}",
            hint=f"run `git worktree prune` in {self.repo}, then retry",
        )

    # -- the operations

    async def ensure(self, task: Task) -> Path:
        """The task's worktree: adopted if T25 made it and git lists it, else created on
        `task.branch` from the default branch. Refuses anything else, saying why."""
        path = self.path_for(task.id)
        with self._working_on(task.id):
            if os.path.lexists(path):
                await self._verify(task, path)
                return path
            theirs = (self._read_record(task.id) or {}).get("owner", self.owner)
            if not matches("owner", theirs, self.owner, self.former):
                raise WorktreeRefused(
                    f"{self._record_path(task.id)} records another T25 installation "
                    f"({theirs!r}) for {task.id}",
                    hint="two installations share this worktree root; give each its own",
                )
            if path in await self._listing():  # its directory removed by hand: made again
                await git("worktree", "prune", cwd=self.repo, drivers_from=())
            await self._create(task, path)
            await self._verify(task, path)
            return path

    async def _create(self, task: Task, path: Path) -> None:
        start = f"refs/heads/{self.default_branch}"
        if await self._rev(start) is None:
            raise WorktreeRefused(
                f"the default branch {self.default_branch!r} has no commit in {self.repo}",
                hint="set default_branch for this project in t25.yaml to an existing branch",
            )
        # The record goes first: a crash after it leaves a record without a tree, which the
        # next ensure() rewrites; the other order would leave a tree nobody may adopt.
        self._write_record(task, path)
        for pause in (*ADMIN_RACE.pauses(ADMIN_RACE_RETRIES), None):
            # --no-checkout: git would check the files out in the new worktree reading its
            # config, which may hold filters the main checkout's does not (`includeIf
            # "gitdir:**/worktrees/**"`); `_check_out` does it with those switched off.
            args: tuple[str, ...]
            if await self._rev(f"refs/heads/{task.branch}") is not None:
                # A retry after cleanup: the branch was kept, so check it out again.
                args = ("worktree", "add", "--quiet", "--no-checkout", "--", str(path), task.branch)
            else:
                # A full ref as start point: `trunk` could also be a tag or a file name.
                args = (
                    "worktree",
                    "add",
                    "--quiet",
                    "--no-checkout",
                    "--no-track",
                    "-b",
                    task.branch,
                    "--",
                    str(path),
                    start,
                )
            # `git worktree add` of several tasks at once race on the repository's shared
            # admin directory (.git/worktrees): one at a time in this process, and again
            # when another process was adding one at the same moment.
            async with self._admin:
                done = await run_git(*args, cwd=self.repo)
            if done.code == 0 or HALF_WRITTEN not in done.err or pause is None:
                break
            await asyncio.sleep(pause)
        problem = None
        if done.code == 0:
            done = await self._check_out(path)
            problem = await self._unworkable(path) if done.code == 0 else None
            if done.code != 0 or problem:  # a tree T25 just made: nobody's work in it
                async with self._admin:
                    await run_git("worktree", "remove", "--force", "--", str(path), cwd=self.repo)
        if done.code != 0 or problem:
            self._record_path(task.id).unlink(missing_ok=True)
        if problem:
            raise WorktreeRefused(
                f"T25 cannot work {task.id} in a worktree of this repository: {problem.message}",
                hint=problem.hint,
            )
        if done.code != 0:
            unfetched = lfs.unfetched_object(done.err)
            raise WorktreeRefused(
                f"git could not create the worktree of {task.id}: "
                f"{unfetched or _git_reason(done.err)}",
                hint=lfs.FETCH_HINT if unfetched else "fix what git reports, then retry",
            )

    async def _check_out(self, path: Path) -> Completed:
        """Fill a worktree made with --no-checkout, every filter but git-lfs's switched off
        as the new worktree's own config names them (`run_git` reads them in `path`)."""
        return await run_git("reset", "--hard", "--quiet", "--no-recurse-submodules", cwd=path)

    async def _unworkable(self, path: Path) -> WorktreeRefused | None:
        """After the check-out: the submodules the main checkout has, checked out from its
        own copies (core.workspace.submodules); why the tree cannot be worked, or None."""
        problem = await lfs.lfs_problem(path)
        if problem:
            return WorktreeRefused(problem, hint=INSTALL_HINT)
        if self._common_dir is None:
            self._common_dir = await self._git_common_dir(self.repo)
        try:
            await submodules.check_out(path, self._common_dir)
        except WorktreeRefused as exc:
            return exc
        return None

    async def reset(self, task: Task, commit: str, *, snapshot: bool = True) -> None:
        """Put the task's worktree back at `commit` (T25's last commit on the branch): on the
        task branch, every change, commit of the agent's own and untracked or ignored file
        gone. After a run that broke the invariant, so nothing it left is built on; what
        the worktree held is kept first (`snapshot`) unless the caller kept it already."""
        path = self.path_for(task.id)
        if snapshot:
            await self.snapshot(task)
        with self._working_on(task.id):
            await self._verify(task, path, on_branch=False)
            git_dir = await self._admin_dir(path)
            # Whatever the run left at `.git` goes: the file git writes takes its place.
            dot_git = path / ".git"
            if dot_git.is_dir() and not dot_git.is_symlink():
                shutil.rmtree(dot_git)
            dot_git.unlink(missing_ok=True)
            dot_git.write_text(f"gitdir: {git_dir}\n", encoding="utf-8")
            place = (f"--git-dir={git_dir}", f"--work-tree={path}")
            await git(*place, "symbolic-ref", "HEAD", f"refs/heads/{task.branch}", cwd=path)
            await git(
                *place, "reset", "--hard", "--quiet", "--no-recurse-submodules", commit, cwd=path
            )
            await git(*place, "clean", "-f", "-f", "-d", "-x", "--quiet", cwd=path)

    async def set_aside(self, task: Task, name: str) -> str | None:
        """Before a run is executed again after its lease was lost: commit what the lost
        attempt left in the worktree (changes, commits of its own, untracked files) under
        `refs/t25/leftovers/<name>`, and put the worktree back at the branch tip, so none of
        it reaches this attempt's commit. The commit's id, or None when nothing was left."""
        path = self.path_for(task.id)
        tip = await self.tip(task)
        if tip is None or not path.exists():
            return None
        with self._working_on(task.id):
            await self._verify(task, path, on_branch=False)
            head = await self._rev("HEAD", cwd=path) or tip
            status = await git("status", "--porcelain", "--untracked-files=all", cwd=path)
            if not status and head == tip:
                return None
            await git("add", "--all", "--sparse", cwd=path)
            tree = await git("write-tree", cwd=path)
            message = f"{task.id}: what a lost attempt of {name} left\n\nKept by T25."
            identity = await self._identity(path)
            kept = await git(*identity, "commit-tree", tree, "-p", head, "-m", message, cwd=path)
            await git("update-ref", f"{LEFTOVERS_REF}/{name}", kept, cwd=path, drivers_from=())
        await self.reset(task, tip, snapshot=False)
        return kept

    async def snapshot(self, task: Task) -> str | None:
        """Before the task's worktree is reset or removed: what it holds — its HEAD, with
        any change and untracked file committed on top (never on the branch) — kept under
        `refs/t25/snapshots/<id>/<n>`. The commit kept, or None without a worktree."""
        path = self.path_for(task.id)
        if not path.exists():
            return None
        with self._working_on(task.id):
            await self._verify(task, path, on_branch=False)
            head = await self._rev("HEAD", cwd=path)
            if head is None:
                return None
            kept = head
            if await git("status", "--porcelain", "--untracked-files=all", cwd=path):
                await git("add", "--all", "--sparse", cwd=path)
                tree = await git("write-tree", cwd=path)
                message = f"{task.id}: the worktree as it was\n\nKept by T25."
                identity = await self._identity(path)
                kept = await git(
                    *identity, "commit-tree", tree, "-p", head, "-m", message, cwd=path
                )
            await self._keep_ref(f"{SNAPSHOTS_REF}/{task.id}", kept)
        return kept

    async def rewind(self, task: Task, commit: str) -> str | None:
        """Move the task branch (and its worktree) back to `commit`, for a reset or a
        retried implementation, keeping the head it had under `refs/t25/archive/<id>/<n>`
        (and the worktree under a snapshot). The head archived, or None when the branch
        was at `commit` already."""
        tip = await self.tip(task)
        if tip is None or tip == commit:
            return None
        await self._keep_ref(f"{ARCHIVE_REF}/{task.id}", tip)
        await self.reset(task, commit)
        return tip

    async def _keep_ref(self, prefix: str, commit: str) -> str:
        """Point `<prefix>/<n>` at `commit`, n one more than the highest there; the ref."""
        listed = await git(
            "for-each-ref", "--format=%(refname)", f"{prefix}/", cwd=self.repo, drivers_from=()
        )
        taken = [
            int(r.rsplit("/", 1)[1]) for r in listed.splitlines() if r.rsplit("/", 1)[1].isdigit()
        ]
        ref = f"{prefix}/{max(taken, default=0) + 1}"
        await git("update-ref", ref, commit, cwd=self.repo, drivers_from=())
        return ref

    async def _identity(self, path: Path) -> list[str]:
        """`-c user.name=… -c user.email=…` for what the repository does not set."""
        identity: list[str] = []
        for key, fallback in zip(("user.name", "user.email"), T25_IDENTITY, strict=True):
            if not await git("config", key, cwd=path, check=False, drivers_from=()):
                identity += ["-c", f"{key}={fallback}"]
        return identity

    async def tip(self, task: Task) -> str | None:
        """The commit the task branch is at, None before it exists."""
        return await self._rev(f"refs/heads/{task.branch}")

    async def commit_all(self, task: Task, message: str) -> str | None:
        """Commit everything changed in the worktree on the task branch; None if nothing
        changed. Ignored files stay out, as git decides. Hooks never run."""
        path = self.path_for(task.id)
        with self._working_on(task.id):
            await self._verify(task, path)
            await _stage(path)
            outward = await self._outward_links(path)
            if outward:
                raise WorktreeRefused(
                    f"T25 does not commit a link that leads outside the worktree: "
                    f"{_names(list(outward))}",
                    hint="remove the link from the worktree, then retry",
                )
            staged = await run_git(
                "diff", "--cached", "--quiet", "--no-ext-diff", "--no-textconv", cwd=path
            )
            if staged.code == 0:
                return None
            identity = await self._identity(path)
            await git(
                *identity,
                "commit",
                "--quiet",
                "--no-verify",
                "--no-gpg-sign",
                "-m",
                message,
                cwd=path,
            )
            return await git("rev-parse", "HEAD", cwd=path)

    async def outward_links(self, task: Task) -> tuple[str, ...]:
        """The symbolic links `commit_all` would commit, with what came on the branch before,
        that lead outside the worktree (`etc -> /etc`), as `link -> target`. A link is the
        one kind of file whose content makes the main checkout, once merged, read or write
        elsewhere; `commit_all` refuses to commit one."""
        path = self.path_for(task.id)
        with self._working_on(task.id):
            await self._verify(task, path)
            await _stage(path)
            return await self._outward_links(path)

    async def _outward_links(self, path: Path) -> tuple[str, ...]:
        """The staged links the branch adds since it left the default branch that resolve
        outside `path` (an absolute target always counts: it names this machine)."""
        base = await git(
            "merge-base", f"refs/heads/{self.default_branch}", "HEAD", cwd=path, drivers_from=()
        )
        raw = await git_bytes(
            "diff", "--cached", "--raw", "-z", "--no-renames", "--no-ext-diff", base, cwd=path
        )
        fields = os.fsdecode(raw).split("\0")
        top = path.resolve()
        out = []
        for meta, name in zip(fields[::2], fields[1::2], strict=False):
            _old_mode, new_mode, _old, blob = meta.lstrip(":").split()[:4]
            if new_mode != "120000":
                continue
            target = os.fsdecode(await git_bytes("cat-file", "blob", blob, cwd=path))
            where = Path(os.path.realpath(path / name))
            if os.path.isabs(target) or not where.is_relative_to(top):
                out.append(f"{name} -> {target}")
        return tuple(out)

    async def _range(self, task: Task) -> tuple[str, str]:
        """(merge-base with the default branch, tip of the task branch)."""
        tip = await self._rev(f"refs/heads/{task.branch}")
        if tip is None:
            raise WorktreeRefused(
                f"the task branch {task.branch} does not exist",
                hint="the task has no worktree yet; nothing to compare",
            )
        base = await git("merge-base", f"refs/heads/{self.default_branch}", tip, cwd=self.repo)
        return base, tip

    async def diff_stat(self, task: Task) -> DiffStat:
        """Files, added and deleted lines of the task branch since it left the default
        branch; a binary file counts as a file with no lines."""
        base, tip = await self._range(task)
        raw = await git_bytes(
            "diff",
            "--numstat",
            "-z",
            "-M",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            base,
            tip,
            "--",
            cwd=self.repo,
        )
        fields = os.fsdecode(raw).split("\0")
        files, renamed_from, added, deleted, i = [], [], 0, 0, 0
        while i < len(fields):
            head = fields[i]
            i += 1
            if not head:
                continue
            plus, minus, name = head.split("\t", 2)
            if not name:  # a rename: the old and new names follow
                renamed_from.append(fields[i])
                name, i = fields[i + 1], i + 2
            files.append(name)
            if plus != "-":
                added, deleted = added + int(plus), deleted + int(minus)
        raw = await git_bytes(
            "diff", "--name-only", "-z", "-M", "--diff-filter=D", "--no-ext-diff", base, tip,
            "--", cwd=self.repo,
        )  # fmt: skip
        return DiffStat(
            files=tuple(files),
            renamed_from=tuple(renamed_from),
            removed=tuple(name for name in os.fsdecode(raw).split("\0") if name),
            added=added,
            deleted=deleted,
        )

    async def manifests(self, task: Task, paths: Sequence[str]) -> tuple[ManifestChange, ...]:
        """Each of `paths` as text where the task branch left the default branch and at its
        tip (None where it does not exist, is not UTF-8 or is over MAX_MANIFEST_CHARS)."""
        base, tip = await self._range(task)
        out = []
        for path in paths:
            ends = [await self._text_at(commit, path) for commit in (base, tip)]
            out.append(ManifestChange(path=path, before=ends[0], after=ends[1]))
        return tuple(out)

    async def _text_at(self, commit: str, path: str) -> str | None:
        # `cat-file blob` runs no filter or textconv: nothing a repository plants.
        done = await run_git("cat-file", "blob", f"{commit}:{path}", cwd=self.repo, drivers_from=())
        if done.code != 0:
            return None
        try:
            text = done.out.decode()
        except UnicodeDecodeError:
            return None
        return text if len(text) <= MAX_MANIFEST_CHARS else None

    async def changed(self, before: str | None, after: str) -> tuple[str, ...]:
        """The paths that differ between two commits (every path of `after` with no `before`)."""
        base = before or EMPTY_TREE
        raw = await git_bytes(
            "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
            base, after, "--", cwd=self.repo,
        )  # fmt: skip
        return tuple(name for name in os.fsdecode(raw).split("\0") if name)

    async def diff(self, task: Task) -> str:
        """The unified diff of the task branch since it left the default branch."""
        base, tip = await self._range(task)
        raw = await git_bytes(
            "diff",
            "-M",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            base,
            tip,
            "--",
            cwd=self.repo,
        )
        return raw.decode(errors="replace")

    async def cleanup(self, task: Task, *, dry_run: bool = False) -> Cleanup:
        """Remove the worktree if, and only if, nothing in it could be lost: caches
        (`worktrees.caches`) aside, no uncommitted, untracked or ignored file. `dry_run`:
        the same decision, said and not done."""
        path = self.path_for(task.id)
        with self._working_on(task.id):
            if not os.path.lexists(path) and path not in await self._listing():
                return Cleanup(False, f"no worktree at {path}; nothing to remove", dry_run)
            kept, caches = await self._may_remove(task, path)
            if kept is not None:
                return Cleanup(
                    False, f"{'would keep' if dry_run else 'kept'} {path}: {kept}", dry_run
                )
            inside = await submodules.changes(path)
            if inside:
                return Cleanup(
                    False,
                    f"{'would keep' if dry_run else 'kept'} {path}: changes inside submodules: "
                    f"{_names(list(inside))}",
                    dry_run,
                )
            if dry_run:
                return Cleanup(True, f"would remove {path}{_dropping(caches)}", dry_run)
            await asyncio.to_thread(drop_untracked, path, caches.untracked_caches)
            snapshot = await self.snapshot(task)
            held = await submodules.take_down(path, await self._admin_dir(path))
            if held:
                return Cleanup(
                    False, f"kept {path}: {held}; move or delete them, then clean up again"
                )
            # Never --force: if git sees something we did not, git's refusal stands.
            async with self._admin:
                done = await run_git(
                    "worktree",
                    "remove",
                    "--",
                    str(path),
                    cwd=self.repo,
                    drivers_from=(self.repo, path),
                )
            if done.code != 0:
                return Cleanup(
                    False, f"kept {path}: git refused to remove it ({_git_reason(done.err)})"
                )
            self._record_path(task.id).unlink(missing_ok=True)
            at = (
                f" (its head kept as {snapshot[:12]} under {SNAPSHOTS_REF}/{task.id}/)"
                if snapshot
                else ""
            )
            return Cleanup(
                True, f"removed {path}{_dropping(caches)}; branch {task.branch} kept{at}"
            )

    async def _may_remove(self, task: Task, path: Path) -> tuple[str | None, Leftovers]:
        """The one decision of a cleanup and of its dry run: (why the tree at `path` is
        kept, or None; its caches, which go with it)."""
        none = Leftovers({})
        try:
            await self._verify(task, path)
        except WorktreeRefused as exc:
            return f"{exc.message}; {exc.hint}", none
        listed = (await self._listing()).get(Path(os.path.realpath(path)), {})
        if "locked" in listed:
            why = f" ({listed['locked']})" if listed["locked"] else ""
            return f"git has it locked{why}; `git worktree unlock` it first", none
        left = await self._leftovers(path)
        dirt = _dirt(left)
        if dirt:
            return f"{dirt}; commit, move or delete them, then clean up again", left
        return None, left

    async def holds(self, task: Task) -> bool:
        """Whether the repository is a checkout here with the task's branch."""
        return await holds_branch(self.repo, task.branch)

    def has_worktree(self, task: Task) -> bool:
        return os.path.lexists(self.path_for(task.id))

    async def landed(self, task: Task) -> str | None:
        """Whether the task branch's change is in the default branch although T25 did not
        merge it: merged there (its tip an ancestor), or squash-, rebase- or cherry-pick-
        merged — merging the branch now would change nothing (`git merge-tree`: the tree
        it would make is the default branch's own). How, in words; None when it is not."""
        tip = await self.tip(task)
        default = f"refs/heads/{self.default_branch}"
        if tip is None:
            return None
        inside = await run_git(
            "merge-base", "--is-ancestor", tip, default, cwd=self.repo, drivers_from=()
        )
        if inside.code == 0:
            return f"{task.branch} is merged into {self.default_branch}"
        tree = (await merge_tree(self.repo, default, tip)).tree
        if tree is not None and tree == await git(
            "rev-parse", f"{default}^{{tree}}", cwd=self.repo
        ):
            return (
                f"{task.branch}'s change is already in {self.default_branch} "
                "(squash- or rebase-merged: merging it would change nothing)"
            )
        return None

    async def _leftovers(self, path: Path) -> Leftovers:
        """What the tree holds beyond its commit, its caches told apart."""
        raw = await git_bytes(
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=traditional",
            "--untracked-files=all",
            "--ignore-submodules=all",
            cwd=path,
        )
        return sort_leftovers(status_entries(raw), self.caches)

    async def moved_since_review(self, task: Task) -> None:
        """Refuse (MergeRefused) a task branch whose head is not the commit REVIEW approved,
        naming the commits that are new. A task reviewed before T25 recorded the head
        (`reviewed_head` None) is not checked."""
        reviewed = task.reviewed_head
        tip = await self._rev(f"refs/heads/{task.branch}")
        if reviewed is None or tip is None or tip == reviewed:
            return
        new = await git(
            "log", "--no-decorate", "--format=%h %s", f"{reviewed}..{tip}", cwd=self.repo
        )
        lines = new.splitlines() or [f"{tip[:12]} (the branch no longer contains it)"]
        shown = "; ".join(lines[:_SHOWN]) + (
            f" … and {len(lines) - _SHOWN} more" * (len(lines) > _SHOWN)
        )
        raise MergeRefused(
            f"{task.branch} has moved since review approved {reviewed[:12]}: "
            f"{len(lines)} new commit(s): {shown}",
            hint=f"inspect them (git log {reviewed[:12]}..{task.branch}); a merge takes only "
            f"what was reviewed: `t25 recheck {task.id}` sends it through QA and review again",
        )

    async def merge(self, task: Task, *, message: str) -> str:
        """Make the merge commit in a trial worktree and fast-forward the default branch
        to it (no checks in between); return the merge commit."""
        trial = await self.trial_merge(task, message=message)
        try:
            return await self.land(trial)
        finally:
            await self.discard(trial)

    async def trial_merge(self, task: Task, *, message: str) -> TrialMerge:
        """The merge of the very commit REVIEW approved into the default branch, made as a
        commit on no branch (`git merge-tree`: no checkout is touched) and checked out in a
        trial worktree of its own, where the QA checks run on it. Refused, with nothing
        changed, unless the main checkout could take it and it is a clean merge."""
        default, branch = self.default_branch, task.branch
        with self._working_on(task.id):
            await self._ready_for_merge()
            tip = await self._rev(f"refs/heads/{branch}")
            if tip is None:
                raise MergeRefused(
                    f"the task branch {branch} does not exist", hint="nothing to merge"
                )
            await self.moved_since_review(task)
            base = await git("rev-parse", f"refs/heads/{default}", cwd=self.repo)
            ahead = await git("rev-list", "--count", f"{base}..{tip}", cwd=self.repo)
            if ahead == "0":
                raise MergeRefused(
                    f"{branch} has no commits beyond {default}", hint="nothing to merge"
                )
            tried = await merge_tree(self.repo, base, tip)
            if tried.conflicts:
                raise MergeRefused(
                    f"merging {branch} into {default} conflicts in "
                    f"{_names(list(tried.conflicts))}; {default} is unchanged",
                    hint=f"bring {branch} up to date with {default} and resolve them, then merge",
                )
            if tried.tree is None:
                raise MergeRefused(
                    f"git could not merge {branch} into {default}: {_git_reason(tried.err)}",
                    hint="fix what git reports, then merge",
                )
            tree = tried.tree
            identity = await self._identity(self.repo)
            commit = await git(
                *identity, "commit-tree", tree, "-p", base, "-p", tip, "-m", message,
                cwd=self.repo, drivers_from=(),
            )  # fmt: skip
            in_the_way = await untracked_in_the_way(self.repo, base, commit)
            if in_the_way:
                raise MergeRefused(
                    f"the merge would write over {len(in_the_way)} file(s) of the main "
                    f"checkout that git does not track: {_names(in_the_way)}",
                    hint="move them away (or commit them), then merge",
                )
            path = await self._trial_tree(task, commit)
        return TrialMerge(
            task_id=task.id, branch=branch, commit=commit, base=base, tip=tip, path=path
        )

    async def _trial_tree(self, task: Task, commit: str) -> Path:
        """`<root>/.merge/<id>`: a detached worktree at `commit`, for the checks to run in."""
        trials = self._real_root() / TRIAL_DIR
        trials.mkdir(exist_ok=True)
        if trials.is_symlink() or trials.resolve() != self._real_root() / TRIAL_DIR:
            raise WorktreeRefused(
                f"{trials} is not a plain directory inside the worktree root",
                hint=f"remove {trials}; T25 recreates it",
            )
        path = trials / self.path_for(task.id).name
        await self._remove_trial(path)  # one a stopped merge left
        async with self._admin:
            done = await run_git(
                "worktree", "add", "--quiet", "--no-checkout", "--detach", "--", str(path),
                commit, cwd=self.repo,
            )  # fmt: skip
        if done.code == 0:
            done = await self._check_out(path)
        problem = await self._unworkable(path) if done.code == 0 else None
        if done.code != 0 or problem:
            await self._remove_trial(path)
        if problem:
            raise MergeRefused(
                f"the merge of {task.branch} cannot be checked: {problem.message}",
                hint=problem.hint,
            )
        if done.code != 0:
            unfetched = lfs.unfetched_object(done.err)
            raise MergeRefused(
                f"git could not check out the merge of {task.branch}: "
                f"{unfetched or _git_reason(done.err)}",
                hint=lfs.FETCH_HINT if unfetched else "fix what git reports, then merge",
            )
        return path

    async def land(self, trial: TrialMerge) -> str:
        """Move the default branch to the tried merge commit, by fast-forward only: refused,
        with nothing changed, when the main checkout cannot take it or the default branch
        has moved since the trial."""
        default = self.default_branch
        with self._working_on(trial.task_id):
            await self._ready_for_merge()
            now = await git("rev-parse", f"refs/heads/{default}", cwd=self.repo)
            if now != trial.base:
                raise MergeRefused(
                    f"{default} moved from {trial.base[:12]} to {now[:12]} while the merge "
                    "was tried; it is unchanged",
                    hint="merge again: the checks run on the new merge",
                )
            # Named first, so that a run watching the checkout sees HEAD move along it as
            # T25's doing (core.workspace.fingerprint), whenever it looks.
            await git(
                "update-ref", f"{LANDED_REF}/{trial.task_id}", trial.commit,
                cwd=self.repo, drivers_from=(),
            )  # fmt: skip
            # Explicit flags beat merge.* and branch.<name>.mergeOptions config.
            done = await run_git(
                "merge", "--ff-only", "--no-verify", "--no-autostash", "--quiet",
                trial.commit, cwd=self.repo,
            )  # fmt: skip
            if done.code != 0:
                raise MergeRefused(
                    f"git refused to move {default} to the merge of {trial.branch}: "
                    f"{_git_reason(done.err)}",
                    hint="fix what git reports in the main checkout, then merge",
                )
            after = await git("rev-parse", "HEAD", cwd=self.repo)
            if after != trial.commit:  # cannot happen with --ff-only; checked anyway
                raise T25Error(
                    f"{default} is at {after[:12]}, not at the merge {trial.commit[:12]}",
                    hint="inspect the main checkout's history",
                )
            return after

    async def discard(self, trial: TrialMerge) -> None:
        """Remove the trial worktree (its commit is in the repository, or was refused)."""
        if trial.path is not None:
            await self._remove_trial(trial.path)

    async def _remove_trial(self, path: Path) -> None:
        """Remove a trial tree git lists as a worktree of this repository: forced, since it
        holds only T25's own merge commit and what the checks left in it. Anything else at
        its path is never deleted: the merge is refused, naming it."""
        listed = path in await self._listing()
        if not listed:
            if os.path.lexists(path):
                raise MergeRefused(
                    f"{path} is in the way of the merge's trial worktree, and git does not "
                    "list it as one",
                    hint=f"move {path} away, then merge",
                )
            return
        async with self._admin:
            done = await run_git(
                "worktree", "remove", "--force", "--", str(path), cwd=self.repo, drivers_from=()
            )
        if done.code != 0 and not os.path.lexists(path):  # its entry outlived the directory
            await run_git("worktree", "prune", cwd=self.repo, drivers_from=())
        elif done.code != 0:
            log.warning("t25: the trial worktree %s was not removed: %s", path, done.err.strip())

    async def _ready_for_merge(self) -> None:
        """Refuse unless the main checkout is on the default branch, with no merge in
        progress and no uncommitted change to a tracked file."""
        default = self.default_branch
        head = await git("symbolic-ref", "--quiet", "HEAD", cwd=self.repo, check=False)
        if head != f"refs/heads/{default}":
            now = head.removeprefix("refs/heads/") if head else "a detached HEAD"
            raise MergeRefused(
                f"the main checkout is on {now}, not on {default}",
                hint=f"switch it to {default} (git switch {default}), then merge",
            )
        if await self._rev("MERGE_HEAD") is not None:
            raise MergeRefused(
                "a merge is already in progress in the main checkout",
                hint="finish it or abort it (git merge --abort) first",
            )
        raw = await git_bytes(
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=no",
            "--ignore-submodules=all",
            cwd=self.repo,
        )
        dirty = [name for _, name in status_entries(raw)]
        if dirty:
            raise MergeRefused(
                f"the main checkout has uncommitted changes to {len(dirty)} tracked "
                f"file(s): {_names(dirty)}",
                hint="commit or stash them, then merge",
            )

    async def fingerprint(self, task: Task | None = None) -> Fingerprint:
        """The main checkout's fingerprint, leaving out this worktree root; for a task's run,
        with its branch among the refs and its worktree's config among the git files."""
        if task is None:
            return await _past_half_written(lambda: fingerprint(self.repo, exclude=[self.root]))
        return await self._fingerprint(task, await self._admin_dir(self.path_for(task.id)))

    async def _fingerprint(self, task: Task, git_dir: Path) -> Fingerprint:
        return await _past_half_written(
            lambda: fingerprint(
                self.repo, exclude=[self.root], branch=task.branch, worktree_git_dir=git_dir
            )
        )

    async def watch_run(self, task: Task, *, may_commit: bool = False) -> Watched:
        """Start watching a run of `task` (`may_commit`: its agent may commit on the branch);
        `self.watch.finish` ends it. The worktree's entry is found now, before the run: what
        the run does to it is measured, never followed."""
        git_dir = await self._admin_dir(self.path_for(task.id))
        own = (f"refs/heads/{task.branch}",) if may_commit else ()
        return await self.watch.start(lambda: self._fingerprint(task, git_dir), may_move=own)


async def _stage(path: Path) -> None:
    """`git add --all` of what T25 is about to commit: refused, with the paths, when it
    holds a change inside a submodule or outside the worktree's sparse cone."""
    await submodules.refuse_changes(path)
    await sparse.refuse_outside(path)
    done = await run_git("add", "--all", cwd=path)
    if done.code != 0:
        outside = sparse.unstaged(done.err)
        if outside is not None:
            raise sparse.refusal(outside)
        raise GitError(f"git add --all failed in {path}: {_git_reason(done.err)}")
    await submodules.refuse_changes(path, staged_only=True)


def _met_half_written_entry(exc: Exception) -> bool:
    return isinstance(exc, GitError) and HALF_WRITTEN in exc.message


async def _past_half_written(read: Callable[[], Awaitable[Fingerprint]]) -> Fingerprint:
    """A fingerprint, read again when its `git status` met a worktree entry another
    process (another worker's `git worktree add`) was still writing."""
    return await retry(
        lambda _: read(),
        pauses=ADMIN_RACE.pauses(ADMIN_RACE_RETRIES),
        transient=_met_half_written_entry,
    )


def _dirt(left: Leftovers) -> str:
    """'' when nothing keeps the tree, else '2 uncommitted, 1 ignored file(s): a.py, b.log …'."""
    counts = [f"{len(names)} {kind}" for kind, names in left.keeping.items() if names]
    if not counts:
        return ""
    every = [name for names in left.keeping.values() for name in names]
    return f"{', '.join(counts)} file(s): {_names(every)}"


def _dropping(left: Leftovers) -> str:
    """' (its caches with it: 3 files in .pytest_cache/, …)' when it holds any."""
    if not left.caches:
        return ""
    return f" (its caches with it: {len(left.caches)} files in {_names(list(left.cache_dirs))})"


def _names(names: list[str]) -> str:
    return listed(names, _SHOWN)


def _git_reason(stderr: str) -> str:
    """git's own reason in one line: its first error, with any files it lists after it."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "no reason given"
    first = next((line for line in lines if line.startswith(("error:", "fatal:"))), lines[-1])
    if first.startswith(("error:", "fatal:")):
        first = first.split(":", 1)[1].strip()
    files = [line.strip() for line in lines if line.startswith("\t")]
    return f"{first.rstrip(':')}: {_names(files)}" if files else first


class Workspace:
    """The worktrees of every configured project, owned by one T25 installation.

    `owner` names the installation (its store's: core.workspace.ownership); a worktree
    another installation made is never adopted."""

    def __init__(self, config: Config, *, owner: str, former: Sequence[str] = ()) -> None:
        self.config = config
        self.owner, self.former = owner, former
        self._by_project: dict[str, Worktrees] = {}

    def worktrees(self, project: str) -> Worktrees:
        if project not in self._by_project:
            p = self.config.project(project)
            repo = Path(p.repo)
            self._by_project[project] = Worktrees(
                repo,
                self.config.worktrees.root,
                p.default_branch or default_branch(repo),
                owner=self.owner,
                former=self.former,
                caches=self.config.worktrees.caches,
            )
        return self._by_project[project]
