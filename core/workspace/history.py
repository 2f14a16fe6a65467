"""What T25 records on a task branch, and what it keeps of a worktree before it goes.

T25 commits what a run changed (`commit_all`: hooks never run, a link leading out of the
worktree refused); puts a worktree back at a commit after a run that broke the invariant
(`reset`), keeping first what it held (`snapshot`: `refs/t25/snapshots/<id>/<n>`); moves a
branch back for a retried implementation, keeping the head it had (`rewind`:
`refs/t25/archive/<id>/<n>`); and keeps what a lost attempt left before the run is executed
again (`set_aside`: `refs/t25/leftovers/<name>`): what a worktree or branch is moved away
from is kept under a ref first.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from core.domain.models import Task
from core.errors import GitError, WorktreeRefused
from core.workspace import kept_refs, sparse, submodules
from core.workspace.config_values import kept_values
from core.workspace.fingerprint import ARCHIVE_REF, LEFTOVERS_REF, SNAPSHOTS_REF
from core.workspace.git import git, git_bytes, git_reason, listed, run_git
from core.workspace.task_trees import TaskTrees

T25_IDENTITY = ("T25", "t25@localhost")


class History:
    """The commits T25 makes on the task branches of one repository, and the refs it keeps."""

    def __init__(self, trees: TaskTrees) -> None:
        self.trees = trees

    async def commit_all(self, task: Task, message: str) -> str | None:
        """Commit everything changed in the worktree on the task branch; None if nothing
        changed. Ignored files stay out, as git decides. Hooks never run. A change that holds
        a link leading outside the worktree is refused (WorktreeRefused)."""
        commit, outward = await self.commit_inward(task, message)
        if outward:
            raise WorktreeRefused(
                f"T25 does not commit a link that leads outside the worktree: "
                f"{listed(list(outward))}",
                hint="remove the link from the worktree, then retry",
            )
        return commit

    async def commit_inward(self, task: Task, message: str) -> tuple[str | None, tuple[str, ...]]:
        """`commit_all`, staging and checking once: (the commit or None, ()); or, when what
        it would commit holds symbolic links that lead outside the worktree (`etc -> /etc`,
        the one kind of file whose content makes the main checkout, once merged, read or
        write elsewhere), (None, those links as `link -> target`), nothing committed."""
        path = self.trees.path_for(task.id)
        with self.trees.working_on(task.id):
            await self.trees.verify(task, path)
            staged = await _stage(path)
            outward = await self._outward_links(task, path, staged)  # since the branch began
            if outward:
                return None, outward
            if not staged:
                return None, ()
            identity = await commit_identity(path)
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
            common = await self.trees.common_dir()
            # What `git commit` just wrote to the branch's ref file (the worktree is on the
            # branch: verified above), read as git would; otherwise asked of git.
            commit = kept_refs.loose_name(common, f"refs/heads/{task.branch}") or await git(
                "rev-parse", "HEAD", cwd=path, drivers_from=()
            )
            kept_refs.made_commit(common, commit)
            return commit, ()

    async def _outward_links(self, task: Task, path: Path, staged: bytes) -> tuple[str, ...]:
        """The staged links the branch adds since it left the default branch that resolve
        outside `path` (an absolute target always counts: it names this machine). `staged`
        is what the index stages against HEAD (submodules.staged): the same listing when
        the branch has no commit of its own yet."""
        head = await self.trees.tip(task)  # HEAD: the worktree is on the task branch
        base = await self.trees.merge_base(head) if head else None
        raw = (
            staged
            if base is not None and base == head
            else await git_bytes(
                "diff", "--cached", "--raw", "-z", "--no-renames", "--no-ext-diff",
                base or "HEAD", cwd=path,
            )
        )  # fmt: skip
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

    async def reset(self, task: Task, commit: str, *, snapshot: bool = True) -> None:
        """Put the task's worktree back at `commit` (T25's last commit on the branch): on the
        task branch, every change, commit of the agent's own and untracked or ignored file
        gone. After a run that broke the invariant, so nothing it left is built on; what
        the worktree held is kept first (`snapshot`) unless the caller kept it already."""
        path = self.trees.path_for(task.id)
        if snapshot:
            await self.snapshot(task)
        with self.trees.working_on(task.id):
            await self.trees.verify(task, path, on_branch=False)
            git_dir = await self.trees.admin_dir(path)
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
        path = self.trees.path_for(task.id)
        tip = await self.trees.tip(task)
        if tip is None or not path.exists():
            return None
        with self.trees.working_on(task.id):
            await self.trees.verify(task, path, on_branch=False)
            head = await self.trees.rev("HEAD", cwd=path) or tip
            status = await git("status", "--porcelain", "--untracked-files=all", cwd=path)
            if not status and head == tip:
                return None
            await git("add", "--all", "--sparse", cwd=path)
            tree = await git("write-tree", cwd=path)
            message = f"{task.id}: what a lost attempt of {name} left\n\nKept by T25."
            identity = await commit_identity(path)
            kept = await git(*identity, "commit-tree", tree, "-p", head, "-m", message, cwd=path)
            await git("update-ref", f"{LEFTOVERS_REF}/{name}", kept, cwd=path, drivers_from=())
        await self.reset(task, tip, snapshot=False)
        return kept

    async def snapshot(self, task: Task) -> str | None:
        """Before the task's worktree is reset or removed: what it holds — its HEAD, with
        any change and untracked file committed on top (never on the branch) — kept under
        `refs/t25/snapshots/<id>/<n>`. The commit kept, or None without a worktree."""
        path = self.trees.path_for(task.id)
        if not path.exists():
            return None
        with self.trees.working_on(task.id):
            await self.trees.verify(task, path, on_branch=False)
            head = await self.trees.rev("HEAD", cwd=path)
            if head is None:
                return None
            kept = head
            if await git("status", "--porcelain", "--untracked-files=all", cwd=path):
                await git("add", "--all", "--sparse", cwd=path)
                tree = await git("write-tree", cwd=path)
                message = f"{task.id}: the worktree as it was\n\nKept by T25."
                identity = await commit_identity(path)
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
        tip = await self.trees.tip(task)
        if tip is None or tip == commit:
            return None
        await self._keep_ref(f"{ARCHIVE_REF}/{task.id}", tip)
        await self.reset(task, commit)
        return tip

    async def _keep_ref(self, prefix: str, commit: str) -> str:
        """Point `<prefix>/<n>` at `commit`, n one more than the highest there; the ref."""
        listed = await git(
            "for-each-ref",
            "--format=%(refname)",
            f"{prefix}/",
            cwd=self.trees.repo,
            drivers_from=(),
        )
        taken = [
            int(r.rsplit("/", 1)[1]) for r in listed.splitlines() if r.rsplit("/", 1)[1].isdigit()
        ]
        ref = f"{prefix}/{max(taken, default=0) + 1}"
        await git("update-ref", ref, commit, cwd=self.trees.repo, drivers_from=())
        return ref


async def _stage(path: Path) -> bytes:
    """`git add --all` of what T25 is about to commit: refused, with the paths, when it
    holds a change inside a submodule or outside the worktree's sparse cone; what it
    stages against HEAD (`submodules.staged`: empty when there is nothing to commit)."""
    await submodules.refuse_changes(path)
    await sparse.refuse_outside(path)
    done = await run_git("add", "--all", cwd=path)
    if done.code != 0:
        outside = sparse.unstaged(done.err)
        if outside is not None:
            raise sparse.refusal(outside)
        raise GitError(f"git add --all failed in {path}: {git_reason(done.err)}")
    return await submodules.refuse_staged(path)


async def commit_identity(path: Path) -> list[str]:
    """`-c user.name=… -c user.email=…` for what the repository does not set."""
    said = await kept_values(path)
    identity: list[str] = []
    for key, fallback in zip(("user.name", "user.email"), T25_IDENTITY, strict=True):
        if not said.get(key):
            identity += ["-c", f"{key}={fallback}"]
    return identity
