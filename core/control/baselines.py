"""The default branch's test figures: what a change's checks are shown beside.

A merge's trial runs `qa.checks` on the merge commit that becomes the default branch's
head, so when a merge lands, what those checks' runners reported is the default branch's
figures until the next merge. They are kept as an artifact of the merged task
(`merge_checks`: the `Baseline` as JSON, hashed like every artifact); the newest one of a
project's tasks is the project's baseline. A merge made by a worker sends its trial's checks
in its report, and they are kept the same way when the merge is told.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from core.domain.events import ArtifactStored, Event
from core.domain.figures import Baseline
from core.domain.models import ArtifactKind, ArtifactMeta, CheckResult, Task
from core.errors import ArtifactCorrupted
from core.ports.store import Store

MEDIA = "application/json"


async def keep(
    store: Store,
    task: Task,
    commit: str,
    checks: Sequence[CheckResult],
    *,
    run_id: str | None = None,
) -> Event | None:
    """Keep the figures of `checks`, run on `commit` by the merge of `task` that made it
    the default branch's head; the event to publish (None: no checks ran)."""
    if not checks:
        return None
    if run_id is not None and any(  # a worker's merge told again: kept the first time
        a.meta.kind is ArtifactKind.MERGE_CHECKS and a.meta.run_id == run_id
        for a in await store.list_artifacts(task_id=task.id)
    ):
        return None
    branches = {p.name: p.default_branch for p in await store.list_projects()}
    baseline = Baseline(
        branch=branches.get(task.project) or "the default branch",
        commit=commit,
        task_id=task.id,
        figures={c.name: c.figures for c in checks if c.figures is not None},
    )
    meta = ArtifactMeta(
        kind=ArtifactKind.MERGE_CHECKS, media_type=MEDIA, task_id=task.id, run_id=run_id
    )
    artifact = await store.put_artifact(baseline.model_dump_json().encode(), meta)
    return await store.append_event(
        ArtifactStored(
            task_id=task.id,
            run_id=run_id,
            artifact_id=artifact.id,
            artifact_kind=ArtifactKind.MERGE_CHECKS.value,
            sha256=artifact.sha256,
        )
    )


async def latest(store: Store, project: str) -> Baseline | None:
    """The project's baseline: kept by the newest merge whose trial ran checks; None
    before the first one (or when what was kept no longer reads)."""
    newest = await store.newest_artifact(ArtifactKind.MERGE_CHECKS, project=project)
    if newest is None:
        return None
    try:
        _, content = await store.get_artifact(newest.id)  # re-hashed as it is read
        return Baseline.model_validate_json(content)
    except (ArtifactCorrupted, ValidationError):  # `t25 task show --verify` names it
        return None
