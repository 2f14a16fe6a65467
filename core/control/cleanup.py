"""`t25 cleanup [ID] [--dry-run]`: the worktrees T25 may remove, removed — again.

A merge or an archive removes the task's worktree at once, unless something in it could
be lost (uncommitted, untracked or ignored files; a tree that is not what T25 made): then
the worktree is kept and the reason recorded. This is the "clean up again" that reason asks
for, and it also finds the worktrees of DONE tasks whose branch landed in the default branch
some other way (merged there, or squash- or rebase-merged: by patch-id), which no decision
will ever clean. Each removal is the one a merge makes: never forced, the worktree's head
kept under `refs/t25/snapshots/` first; caches (`worktrees.caches`) go with the tree. A dry
run makes the same decision and says it. Git work: run it on the host with the checkout.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.control.service import ControlPlane
from core.domain.events import WorktreeCleaned
from core.domain.models import Task, TaskState


@dataclass(frozen=True)
class CleanupLine:
    """One task's worktree: why it may go, whether it went (in a dry run: whether it would),
    and what the cleanup said."""

    task: Task
    why: str
    removed: bool
    said: str
    dry_run: bool = False


async def clean_up(
    control: ControlPlane, ref: str | None = None, *, dry_run: bool = False
) -> list[CleanupLine]:
    """Remove the worktrees that may go (of task `ref` only, when given), or with `dry_run`
    say which would and which would be kept, and why: the very decision the cleanup makes
    (`Worktrees.cleanup`). Each removal or refusal recorded as a WorktreeCleaned."""
    tasks = (
        [await control.task(ref)] if ref else await control.store.list_tasks(include_archived=True)
    )
    out: list[CleanupLine] = []
    for task in tasks:
        worktrees = control.worktrees(task.project)
        if not worktrees.has_worktree(task):
            continue
        why = await _why_it_may_go(control, task)
        if why is None:
            continue
        done = await worktrees.cleanup(task, dry_run=dry_run)
        if not dry_run:
            await control.record(
                WorktreeCleaned(task_id=task.id, removed=done.removed, reason=done.reason)
            )
        out.append(CleanupLine(task, why, done.removed, done.reason, dry_run))
    return out


async def _why_it_may_go(control: ControlPlane, task: Task) -> str | None:
    if task.merged:
        return "merged"
    if task.archived:
        return "archived"
    if task.state is TaskState.DONE:
        return await control.worktrees(task.project).merges.landed(task)
    return None
