"""The task worktrees of one repository: where each lies, who owns it, who drives it, and
making one. The rest of a worktree's life is built on this (core.workspace.worktrees).

Every task gets a git worktree of its own at `<root>/<task id>`, on branch `<type>/<id>`,
created from the repository's default branch. The decisions, and the attack each one answers:

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
* **One driver per worktree.** `flock` on `<root>/.meta/<id>.lock`, holding the pid
  (core.workspace.worktree_lock).
* **No planted program runs.** Every git call goes through `core.workspace.git`, which switches off
  hooks, fsmonitor, filters, merge drivers, external diff, textconv, pagers and signing; Git
  LFS's filter alone runs, as git-lfs's own binary (core.workspace.lfs_filter).
* **Repository shapes.** Submodules are checked out from the main checkout's own copies and
  a change inside one is refused (core.workspace.submodules); the worktree follows the main
  checkout's sparse cone and a change outside it is refused (core.workspace.sparse).
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from core.domain.backoff import Backoff, retry
from core.domain.models import Task
from core.errors import GitError, WorktreeRefused
from core.workspace import lfs, submodules
from core.workspace.git import Completed, git, git_bytes, git_reason, holds_branch, run_git
from core.workspace.kept_refs import kept_commit
from core.workspace.lfs_filter import INSTALL_HINT
from core.workspace.merge_bases import merge_base
from core.workspace.ownership import matches, read_record, write_record
from core.workspace.real_paths import resolved
from core.workspace.worktree_lock import WorktreeLock

META_DIR = ".meta"
# Plain names only: no separator, no dot at all (so no `..`, no hidden names, and
# `<id>.json` / `<id>.lock` can never collide), bounded length.
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# `git worktree add` writes a new entry of the repository's admin directory (.git/worktrees)
# file by file, and git reading the entries meanwhile (`worktree list`, another `worktree
# add`) dies on its still-empty commondir: "failed to read .git/worktrees/<name>/commondir".
# Such a call is made again after these pauses (1.75 s in all).
HALF_WRITTEN = "failed to read"
ADMIN_RACE = Backoff(0.05, 0.5)
ADMIN_RACE_RETRIES = 6


def met_half_written_entry(exc: Exception) -> bool:
    """Whether a git call failed on a worktree entry another process was still writing."""
    return isinstance(exc, GitError) and HALF_WRITTEN in exc.message


class TaskTrees:
    """Find, adopt and create the task worktrees of one repository, each locked, owned and
    checked before it is touched.

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
    ) -> None:
        if not owner:
            raise ValueError("owner must identify this T25 installation")
        if not default_branch:
            raise ValueError("default_branch is required")
        # Lexical absolute paths (no symlink resolution yet): resolving is what `real_root`
        # checks, every time, so a link planted later is still caught.
        self.repo = Path(os.path.abspath(repo))
        self.root = Path(os.path.abspath(root))
        self.default_branch = default_branch
        self.owner = owner
        self.former = tuple(former)  # names it went by before (core.workspace.ownership)
        self._common_dir: Path | None = None
        # `git worktree add` and `remove` one at a time in this process (see _add).
        self.admin_lock = asyncio.Lock()

    # -- paths and records

    def path_for(self, task_id: str) -> Path:
        """`<root>/<task_id>`, refused unless it resolves directly inside the root."""
        if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
            raise WorktreeRefused(
                f"{task_id!r} cannot name a worktree: a task id is letters, digits, '-' and '_'",
                hint="task ids look like T-7",
            )
        root = self.real_root()
        path = root / task_id
        if path.is_symlink() or resolved(path) != path:
            raise WorktreeRefused(
                f"{path} is a symbolic link (to {os.path.realpath(path)}); T25 never follows "
                "one out of the worktree root",
                hint=f"remove the link {path}, then try again",
            )
        return path

    def real_root(self) -> Path:
        """The root, resolved, after checking no symlink stands between it and its anchor
        (the repository when the root is inside it, else the root's parent directory)."""
        anchor = self.repo if self.root.is_relative_to(self.repo) else self.root.parent
        expected = resolved(anchor) / self.root.relative_to(anchor)
        real = resolved(self.root)
        if real != expected:
            raise WorktreeRefused(
                f"the worktree root {self.root} leads to {real} through a symbolic link",
                hint="point worktrees.root at a real directory, or remove the link",
            )
        return real

    def _meta_dir(self) -> Path:
        root = self.real_root()
        meta = root / META_DIR
        meta.mkdir(parents=True, exist_ok=True)
        if meta.is_symlink() or not meta.is_dir() or self.real_root() != root:
            raise WorktreeRefused(
                f"{meta} is not a plain directory inside the worktree root",
                hint=f"remove {meta}; T25 recreates it",
            )
        return meta

    def _lock_path(self, task_id: str) -> Path:
        self.path_for(task_id)
        return self._meta_dir() / f"{task_id}.lock"

    def record_path(self, task_id: str) -> Path:
        """`<root>/.meta/<id>.json`: the task's ownership record (core.workspace.ownership)."""
        return self._meta_dir() / f"{task_id}.json"

    def _record_for(self, task: Task, path: Path) -> dict[str, str]:
        return {"owner": self.owner, "task_id": task.id, "branch": task.branch, "path": str(path)}

    def _read_record(self, task_id: str) -> dict[str, object] | None:
        return read_record(self.record_path(task_id))

    def _write_record(self, task: Task, path: Path) -> None:
        body = {**self._record_for(task, path), "created_at": datetime.now(UTC).isoformat()}
        write_record(self.record_path(task.id), {**body, "version": 1})

    # -- locking

    def lock(self, task_id: str) -> WorktreeLock:
        """The exclusive lock on one task's worktree; enter it to hold it."""
        return WorktreeLock(self._lock_path(task_id), task_id)

    @contextmanager
    def working_on(self, task_id: str) -> Iterator[None]:
        """Hold the task's lock for one operation, unless this process already holds it."""
        lock = self.lock(task_id)
        if lock.held_here:
            yield
            return
        with lock:
            yield

    # -- what git says

    async def listing(self) -> dict[Path, dict[str, str]]:
        """`git worktree list --porcelain -z`, keyed by resolved path."""
        raw = await retry(
            lambda _: git_bytes("worktree", "list", "--porcelain", "-z", cwd=self.repo),
            pauses=ADMIN_RACE.pauses(ADMIN_RACE_RETRIES),
            transient=met_half_written_entry,
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

    async def rev(self, ref: str, cwd: Path | None = None) -> str | None:
        """The commit `ref` names (asked in `cwd`, else the main checkout); None if none.
        A branch's is kept while its ref files are unchanged (core.workspace.kept_refs)."""
        if cwd is None and ref.startswith("refs/heads/"):
            common = await self.common_dir()
            return await kept_commit(
                common, ref, lambda: self._rev(ref, None), lambda name: self._rev(name, None)
            )
        return await self._rev(ref, cwd)

    async def _rev(self, ref: str, cwd: Path | None) -> str | None:
        sha = await git(
            "rev-parse",
            "--quiet",
            "--verify",
            f"{ref}^{{commit}}",
            cwd=cwd or self.repo,
            check=False,
            drivers_from=(),  # reads refs and objects only: no filter or merge driver runs
        )
        return sha or None

    async def merge_base(self, commit: str) -> str:
        """Where `commit` left the default branch: their merge base, found once for the
        pair (core.workspace.merge_bases); GitError when git finds none."""
        main = f"refs/heads/{self.default_branch}"
        at = await self.rev(main)

        async def find() -> str:
            return await git("merge-base", at or main, commit, cwd=self.repo, drivers_from=())

        if at is None:  # no default branch: git says so
            return await find()
        return await merge_base(await self.common_dir(), at, commit, find)

    async def common_dir(self) -> Path:
        """The repository's common git directory, asked of git once."""
        if self._common_dir is None:
            out = await git(
                "rev-parse", "--path-format=absolute", "--git-common-dir", cwd=self.repo
            )
            self._common_dir = Path(out).resolve()
        return self._common_dir

    async def verify(self, task: Task, path: Path, *, on_branch: bool = True) -> None:
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
        # From the repository's files, as `git worktree list` reads them, with no process.
        try:
            admin = await self.admin_dir(path)
        except WorktreeRefused:
            raise WorktreeRefused(
                f"{path} exists but the repository does not list it as a worktree",
                hint="it is not a worktree of this repository; move it away, then retry",
            ) from None
        if not path.is_dir():
            raise WorktreeRefused(
                f"git lists {path} as a worktree but the directory is gone",
                hint=f"restore it, or run `git worktree prune` in {self.repo}, then retry",
            )
        if not on_branch:
            return
        branch = checked_out(admin)
        if branch != f"refs/heads/{task.branch}":
            now = (branch or "a detached HEAD").removeprefix("refs/heads/")
            raise WorktreeRefused(
                f"{path} is on {now}, not on the task branch {task.branch}",
                hint=f"switch it back (git -C {path} switch {task.branch}), or clean it up",
            )
        # A `.git` file rewritten (or removed, so that git finds the main checkout's
        # repository) would send T25's git calls in the worktree elsewhere.
        used = git_dir_named_by(path)
        if used != admin:
            raise WorktreeRefused(
                f"{path} is not a worktree of {self.repo}: git there uses "
                f"{used or 'the repository of a folder above it'}",
                hint="move it away, then retry",
            )

    async def admin_dir(self, path: Path) -> Path:
        """The worktree's entry in the repository (`<common dir>/worktrees/<name>`), found
        from the repository's side: the one whose `gitdir` names `path`."""
        entries = await self.common_dir() / "worktrees"
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
        with self.working_on(task.id):
            if os.path.lexists(path):
                await self.verify(task, path)
                return path
            theirs = (self._read_record(task.id) or {}).get("owner", self.owner)
            if not matches("owner", theirs, self.owner, self.former):
                raise WorktreeRefused(
                    f"{self.record_path(task.id)} records another T25 installation "
                    f"({theirs!r}) for {task.id}",
                    hint="two installations share this worktree root; give each its own",
                )
            if path in await self.listing():  # its directory removed by hand: made again
                await git("worktree", "prune", cwd=self.repo, drivers_from=())
            await self._create(task, path)
            await self.verify(task, path)
            return path

    async def _create(self, task: Task, path: Path) -> None:
        start = f"refs/heads/{self.default_branch}"
        if await self.rev(start) is None:
            raise WorktreeRefused(
                f"the default branch {self.default_branch!r} has no commit in {self.repo}",
                hint="set default_branch for this project in t25.yaml to an existing branch",
            )
        # The record goes first: a crash after it leaves a record without a tree, which the
        # next ensure() rewrites; the other order would leave a tree nobody may adopt.
        self._write_record(task, path)
        done = await self._add(task, path, start)
        problem = None
        if done.code == 0:
            done = await self.check_out(path)
            problem = await self.unworkable(path) if done.code == 0 else None
            if done.code != 0 or problem:  # a tree T25 just made: nobody's work in it
                async with self.admin_lock:
                    await run_git("worktree", "remove", "--force", "--", str(path), cwd=self.repo)
        if done.code != 0 or problem:
            self.record_path(task.id).unlink(missing_ok=True)
        if problem:
            raise WorktreeRefused(
                f"T25 cannot work {task.id} in a worktree of this repository: {problem.message}",
                hint=problem.hint,
            )
        if done.code != 0:
            unfetched = lfs.unfetched_object(done.err)
            raise WorktreeRefused(
                f"git could not create the worktree of {task.id}: "
                f"{unfetched or git_reason(done.err)}",
                hint=lfs.FETCH_HINT if unfetched else "fix what git reports, then retry",
            )

    async def _add(self, task: Task, path: Path, start: str) -> Completed:
        """`git worktree add --no-checkout` of the task branch at `path` (made from `start`
        when it does not exist yet), tried again while another process writes an entry."""
        for pause in (*ADMIN_RACE.pauses(ADMIN_RACE_RETRIES), None):
            # --no-checkout: git would check the files out in the new worktree reading its
            # config, which may hold filters the main checkout's does not (`includeIf
            # "gitdir:**/worktrees/**"`); `check_out` does it with those switched off.
            args: tuple[str, ...]
            if await self.rev(f"refs/heads/{task.branch}") is not None:
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
            async with self.admin_lock:
                done = await run_git(*args, cwd=self.repo)
            if done.code == 0 or HALF_WRITTEN not in done.err or pause is None:
                break
            await asyncio.sleep(pause)
        return done

    async def check_out(self, path: Path) -> Completed:
        """Fill a worktree made with --no-checkout, every filter but git-lfs's switched off
        as the new worktree's own config names them (`run_git` reads them in `path`)."""
        return await run_git("reset", "--hard", "--quiet", "--no-recurse-submodules", cwd=path)

    async def unworkable(self, path: Path) -> WorktreeRefused | None:
        """After the check-out: the submodules the main checkout has, checked out from its
        own copies (core.workspace.submodules); why the tree cannot be worked, or None."""
        problem = await lfs.lfs_problem(path)
        if problem:
            return WorktreeRefused(problem, hint=INSTALL_HINT)
        try:
            await submodules.check_out(path, await self.common_dir())
        except WorktreeRefused as exc:
            return exc
        return None

    # -- what a task has

    async def tip(self, task: Task) -> str | None:
        """The commit the task branch is at, None before it exists."""
        return await self.rev(f"refs/heads/{task.branch}")

    async def holds(self, task: Task) -> bool:
        """Whether the repository is a checkout here with the task's branch."""
        return await holds_branch(self.repo, task.branch)

    def has_worktree(self, task: Task) -> bool:
        return os.path.lexists(self.path_for(task.id))


def checked_out(admin: Path) -> str | None:
    """The branch a worktree has checked out ("refs/heads/…"), from its entry's HEAD; None
    when detached or unreadable."""
    try:
        head = (admin / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return head.removeprefix("ref:").strip() if head.startswith("ref:") else None


def git_dir_named_by(path: Path) -> Path | None:
    """The git directory git uses in `path` when `path/.git` is a worktree's pointer file
    (`gitdir: …`); None when it is missing, a folder, a link or anything else (git would
    then use something else)."""
    dot_git = path / ".git"
    try:
        if not stat.S_ISREG(dot_git.lstat().st_mode):
            return None
        text = dot_git.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    return (path / text.removeprefix("gitdir:").strip()).resolve()
