"""One finished run's decision, as the pipeline makes it (core.control.pipeline).

A decision is usually one move of the task (into the next stage with its run, to FAILED,
into NEEDS_INPUT with its question); on the way it keeps artifacts (the stage's answer, the
run's own prompt and log when a first telling kept none) and sets fields the run moved
(where the task branch now is, a rewind done). Those are carried by the decision's first
write to the task, so a decision that is one move is one store transaction, and one cut
short by a crash wrote nothing of it: told again, it is decided again, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.domain.events import Event
from core.domain.models import ArtifactKind, ArtifactMeta, Run, Task, TaskState
from core.ports.store import NewArtifact
from core.ports.task_book import Move, TaskBook


class Deciding:
    """The decision on `run` in the making: what its next write carries besides its own."""

    def __init__(
        self,
        book: TaskBook,
        run: Run,
        fields: Mapping[str, Any] | None = None,
        kept: Sequence[NewArtifact] = (),
    ) -> None:
        self.book, self.run = book, run
        self._fields: dict[str, Any] = dict(fields or {})
        self._kept: list[NewArtifact] = list(kept)

    def keep(self, kind: ArtifactKind, content: bytes, media: str) -> None:
        """Keep an artifact of the run with the decision's next write."""
        self._kept.append(run_artifact(self.run, kind, content, media))

    async def move(
        self,
        task: Task,
        to: TaskState | None = None,
        *,
        reason: str = "",
        facts: Mapping[str, Any] | None = None,
        then: Sequence[Event] = (),
        **fields: Any,
    ) -> Task:
        """Move the task into `to` (its fields only: None), with what is pending."""
        move = Move(
            to=to,
            reason=reason,
            facts=facts,
            fields={**self._fields, **fields},
            kept=tuple(self._kept),
            then=tuple(then),
        )
        self._fields, self._kept = {}, []
        return await self.book.move(task, move)

    async def enqueue(self, task: Task, role: str) -> Task:
        """Queue another run of the task's stage (`role`'s), what is pending written first."""
        task = await self.settle(task)
        await self.book.enqueue(task, role)
        return task

    async def settle(self, task: Task) -> Task:
        """Write what is pending with no move to carry it: the fields by themselves (with
        the artifacts), or the artifacts alone."""
        if self._fields:
            return await self.move(task)
        if self._kept:
            kept, self._kept = self._kept, []
            await self.book.keep(kept)
        return task


def run_artifact(run: Run, kind: ArtifactKind, content: bytes | Path, media: str) -> NewArtifact:
    """An artifact of `run` (a Path: a file on this host, stored a chunk at a time), with
    the run's provenance: its role, and the agent that played it."""
    meta = ArtifactMeta(
        kind=kind,
        media_type=media,
        task_id=run.task_id,
        run_id=run.id,
        role=run.role,
        adapter=run.adapter,
        cli_version=run.cli_version,
        model=run.model,
    )
    return NewArtifact(meta=meta, content=content)
