"""What follows a merge this process landed: the default branch pushed, as a worker's merge
pushes it (`core.workspace.pull_request.push_default_branch`), and the fact recorded as a
`MergeLanded` that the cockpit and `t25 merge` report ("merged T-1 into main as 54f8d6b").

The push goes where the task's branch went: PR_OPEN pushes a task's branch to `origin`
whenever the repository has one, so the default branch follows it there. Without a remote
the line says plainly that nothing was pushed. A push that fails is said, never raised: the
merge has landed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.domain.clock import Clock
from core.domain.events import Event, MergeLanded
from core.domain.models import Task
from core.errors import T25Error
from core.ports.store import Store
from core.workspace.pull_request import push_default_branch

if TYPE_CHECKING:
    from core.config.schema import Config
    from core.workspace.worktrees import Worktrees


async def landed(
    store: Store, worktrees: Worktrees, task: Task, commit: str, clock: Clock
) -> Event:
    """Push the default branch after the merge of `task` landed at `commit`; the stored
    `MergeLanded` saying so, to publish."""
    try:
        pushed = await push_default_branch(worktrees)
    except T25Error as exc:  # git itself failing under the push: said, as a refused push is
        pushed = f"{worktrees.default_branch} was not pushed: {exc.message}"
    return await store.append_event(
        MergeLanded(
            at=clock(),
            task_id=task.id,
            into=worktrees.default_branch,
            commit=commit,
            pushed=pushed,
        )
    )


async def landed_by_worker(
    store: Store, task: Task, commit: str, clock: Clock, *, pushed: str = ""
) -> Event:
    """A merge of `task` made elsewhere — by a worker, or by the forge — landed at `commit`:
    recorded as `MergeLanded` (what a worker pushed, its run's note says; `pushed`, what else
    there is to say)."""
    branches = {p.name: p.default_branch for p in await store.list_projects()}
    return await store.append_event(
        MergeLanded(
            at=clock(),
            task_id=task.id,
            into=branches.get(task.project) or "",
            commit=commit,
            pushed=pushed,
        )
    )


def merging_line(task: Task, config: Config) -> str:
    """What a merge under way is doing: `merging T-1: running 2 checks on the merge result…`,
    or, through the forge, `merging T-1's pull request on acme/shop…`."""
    forge = config.project(task.project).pull_request
    if config.merge.via == "forge" and forge is not None:
        return f"merging {task.id}'s pull request on {forge.repo}…"
    checks = len(config.for_project(task.project).qa.checks)
    if not checks:
        return f"merging {task.id}: no checks configured, landing it…"
    return f"merging {task.id}: running {checks} check{'s' if checks != 1 else ''} on the merge result…"


def last_landing(events: list[Event]) -> MergeLanded | None:
    """The latest `MergeLanded` among a task's events, if any."""
    found = [e for e in events if isinstance(e, MergeLanded)]
    return found[-1] if found else None
