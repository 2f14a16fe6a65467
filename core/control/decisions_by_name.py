"""The operator's decisions by name, one line each over `decide`: for code that decides
without a face (the sample board, tests) and reads better as `control.approve("T-3", …)`.

`ControlPlane` takes these as a mixin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.domain.decisions import Decision
from core.domain.models import Task, TaskState
from core.domain.verbs import Verb


class DecisionsByName:
    """`approve`, `merge`, `reset`, … as calls of `decide`."""

    if TYPE_CHECKING:

        async def decide(self, decision: Decision) -> Task: ...

    async def approve(self, ref: str, *, actor: str, reason: str = "") -> Task:
        """Approve the plan a task waits on; `reason` is the approver's comment."""
        return await self.decide(Decision(verb=Verb.APPROVE, task=ref, actor=actor, text=reason))

    async def reject(self, ref: str, *, actor: str, reason: str) -> Task:
        """Send a plan back to PLAN; the reason goes into the planner's next prompt."""
        return await self.decide(Decision(verb=Verb.REJECT, task=ref, actor=actor, text=reason))

    async def answer(self, ref: str, text: str, *, actor: str) -> Task:
        """Answer the question a NEEDS_INPUT task asked; it returns to the stage that asked."""
        return await self.decide(Decision(verb=Verb.ANSWER, task=ref, actor=actor, text=text))

    async def merge(
        self, ref: str, *, actor: str, reason: str = "", allow_paths: Sequence[str] = ()
    ) -> Task:
        """The human merge: only after the checks passed and the verdict is approve, and
        naming each protected path the change touches (`allow_paths`)."""
        return await self.decide(
            Decision(
                verb=Verb.MERGE, task=ref, actor=actor, text=reason, allow_paths=tuple(allow_paths)
            )
        )

    async def cancel(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide(Decision(verb=Verb.CANCEL, task=ref, actor=actor, text=reason))

    async def retry(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide(Decision(verb=Verb.RETRY, task=ref, actor=actor, text=reason))

    async def archive(self, ref: str, *, actor: str, reason: str = "") -> Task:
        return await self.decide(Decision(verb=Verb.ARCHIVE, task=ref, actor=actor, text=reason))

    async def recheck(self, ref: str, *, actor: str, reason: str = "") -> Task:
        """Send a DONE task that is not merged back through QA and REVIEW, on its branch as
        it is now (one that moved since review: what the merge would refuse)."""
        return await self.decide(Decision(verb=Verb.RECHECK, task=ref, actor=actor, text=reason))

    async def edit(
        self, ref: str, changes: dict[str, str | int], *, actor: str, reason: str = ""
    ) -> Task:
        """Change a task's title, description, type or priority (see `_edit`)."""
        return await self.decide(
            Decision(verb=Verb.EDIT, task=ref, actor=actor, text=reason, changes=changes)
        )

    async def reset(self, ref: str, stage: TaskState, *, actor: str, reason: str = "") -> Task:
        """Send a task back to `stage`, its branch to where that stage began."""
        return await self.decide(
            Decision(verb=Verb.RESET, task=ref, actor=actor, text=reason, stage=stage)
        )

    async def acknowledge(self, ref: str, *, actor: str, reason: str) -> Task:
        """Record that a human has seen what a run changed outside its worktree (and what
        T25 put back): retry and merge may go on."""
        return await self.decide(
            Decision(verb=Verb.ACKNOWLEDGE, task=ref, actor=actor, text=reason)
        )
