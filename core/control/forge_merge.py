"""A merge through the forge (`merge.via: forge`): `t25 merge` (and the cockpit's `m`) merges the
task's pull request on the forge, so its branch protections and required reviews apply.

The same gates as a merge T25 makes come first (checks passed, review approved, the move
into DONE sealed, protected paths named), then the line is written in the audit log — before
any effect, as a merge's always is. The branch is pushed (DOCS may have committed after
PR_OPEN pushed), and the forge is asked to merge the pull request only while its head is the
commit review approved (`head`: the forge refuses a head that moved). A refusal voids the
line and says the forge's reason; a merge marks the task merged with the line's announcement.

Which pull request is the one T25 opened and recorded in the sealed move out of PR_OPEN
(core.control.pull_request_decisions): no agent can name another.

`ControlPlane` takes this as a mixin; what it uses of it is declared below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.control.history import sealed_history
from core.control.merge_landing import landed_by_worker
from core.control.merge_record import may_merge, merge_took_effect, void_after
from core.control.verb_rules import with_protected
from core.domain.decisions import Decision
from core.domain.models import Task
from core.domain.verbs import Verb
from core.errors import MergeRefused
from core.workspace.pull_request import push_branch

if TYPE_CHECKING:
    from core.config.schema import Config
    from core.control.audit import AuditLog
    from core.control.keyring import Keyring
    from core.domain.clock import Clock
    from core.domain.events import EventBus
    from core.ports import Store
    from core.ports.forge import ForgeOpener
    from core.workspace.worktrees import Worktrees


class ForgeMerges:
    """`merge_by_forge`, for `decide`."""

    if TYPE_CHECKING:
        config: Config
        store: Store
        clock: Clock
        bus: EventBus
        forges: ForgeOpener | None

        @property
        def audit(self) -> AuditLog: ...

        @property
        def keys(self) -> Keyring: ...

        def worktrees(self, project: str) -> Worktrees: ...

        async def task(self, ref: str) -> Task: ...

        async def _holds(self, task: Task) -> bool: ...

    async def merge_by_forge(self, decision: Decision) -> Task:
        """Merge the task's pull request through the forge, bound to the reviewed commit."""
        async with self.audit.writer() as log:
            task = await self.task(decision.task)
            await may_merge(self.store, self.keys, task, decision)
            forge_config = self.config.project(task.project).pull_request
            number = await pull_request_of(self.store, self.keys, task)
            if forge_config is None or number is None or task.reviewed_head is None:
                raise MergeRefused(
                    f"{task.id} has no pull request T25 opened: merge.via forge merges those",
                    hint=f"`t25 recheck {task.id}` takes it through PR_OPEN again",
                )
            if self.forges is None:
                raise MergeRefused(
                    "this T25 process cannot reach forges", hint="or set merge.via: git"
                )
            holds = await self._holds(task)
            if holds:  # said here, with the new commits, before the forge would refuse it
                await self.worktrees(task.project).merges.moved_since_review(task)
            entry = await log.append(
                actor=decision.actor,
                task=task.id,
                decision=Verb.MERGE.value,
                reason=with_protected(task, decision.text) or decision.text,
                bound_to=f"commit:{task.reviewed_head}",
            )
            try:
                if holds:  # what DOCS committed after PR_OPEN pushed
                    await push_branch(self.worktrees(task.project), task)
                forge = await self.forges(forge_config)
                try:
                    commit = await forge.merge(
                        forge_config.repo,
                        number,
                        head=task.reviewed_head,
                        title=f"{task.title} ({task.id})",
                        message=f"Merged by {decision.actor} with T25.",
                    )
                finally:
                    await forge.close()
            except Exception as exc:
                await void_after(log, entry, exc)
                raise
            task, events = await self.store.apply_decision(
                merge_took_effect(task, entry, self.clock())
            )
            pushed = f"merged through pull request #{number} on {forge_config.repo}"
            events.append(
                await landed_by_worker(self.store, task, commit, self.clock, pushed=pushed)
            )
        for event in events:
            self.bus.publish(event)
        return task


async def pull_request_of(store: Store, keys: Keyring, task: Task) -> int | None:
    """The number of the task's pull request, as T25's sealed moves out of PR_OPEN say."""
    number = (await sealed_history(store, keys, task)).facts.get("pull_request")
    return number if isinstance(number, int) else None
