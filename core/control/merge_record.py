"""A merge git has landed is recorded in the store, whatever the store does meanwhile.

A merge's audit line is anchored before git changes anything; git then fast-forwards the
default branch, and the store records the task merged. Once git has the merge, that record
is a commitment, not an effect that may fail: a store that is away (Postgres restarting,
StoreUnavailable) is waited out with the store's patience (`STORE_PATIENCE_S`, serve's
`--store-patience`) rather than failing the request, and the line is never voided, since
its effect happened. A store away for longer still leaves the line open and says so with
the way on: `t25 merge` of a task whose reviewed commit is already in the default branch
records that merge (`already_landed`), under the line that decided it when it is open.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.control.history import require_sealed_merge
from core.control.verb_rules import mergeable, not_held, protected_named
from core.domain.backoff import Backoff, retry
from core.domain.decisions import Decision
from core.domain.events import DecisionRecorded, Event, TaskUpdated
from core.domain.models import MERGE_ROLE, Run, RunStatus, Task
from core.errors import MergeUnrecorded, StoreUnavailable
from core.ports import DecisionWrite, Store
from core.workspace.merging import merged_already

if TYPE_CHECKING:
    from datetime import datetime

    from core.control.audit import AuditLog, AuditWriter
    from core.control.keyring import Keyring
    from core.domain.audit import AuditEntry
    from core.workspace.trial_merge import TrialMerge
    from core.workspace.worktrees import Worktrees

PAUSES = Backoff(0.5, 5.0, jitter=0.2)
ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)

log = logging.getLogger("t25.merge")


@dataclass(frozen=True)
class AuditLine:
    """What a decision's audit line says."""

    actor: str
    task: str
    decision: str
    reason: str
    bound_to: str | None

    async def to(self, log: AuditWriter, *, anchored_now: bool) -> AuditEntry:
        """The line written (`AuditWriter.append`, anchored now: an effect outside the
        store follows) or made ready to anchor with its effect (`AuditWriter.write`)."""
        recorded = log.append if anchored_now else log.write
        return await recorded(
            actor=self.actor,
            task=self.task,
            decision=self.decision,
            reason=self.reason,
            bound_to=self.bound_to,
        )


async def apply_merge(
    log: AuditWriter,
    audit: AuditLog,
    store: Store,
    worktrees: Worktrees,
    write: DecisionWrite,
    trial: TrialMerge,
    line: AuditLine,
    *,
    patience_s: float,
) -> tuple[Task, list[Event]]:
    """The merge's line anchored, git's fast-forward, then the store's record, which no
    store outage voids. A merge git already has is recorded under the open line that
    decided it, where there is one (its record was lost), else under a line of its own."""
    earlier = open_merge_line(await audit.page(task=write.task_id))
    if earlier is not None and trial.path is None:
        said = {"actor": earlier.actor, "reason": earlier.reason, "bound_to": earlier.bound_to}
        write = dataclasses.replace(write, announce=write.announce.model_copy(update=said))
        return await record_landed(store, write, trial, patience_s)
    if earlier is not None and not await merges_under_way(store, write.task_id):
        await log.void(earlier, "its merge did not land; the merge is decided again")
    entry = await line.to(log, anchored_now=True)
    try:
        await land_once(worktrees, trial)
    except Exception as exc:
        await void_after(log, entry, exc)
        raise
    return await record_landed(store, write, trial, patience_s)


async def merges_under_way(store: Store, task_id: str) -> list[Run]:
    """A worker's merge of the task, queued or running (its line is open)."""
    runs = await store.list_runs(task_id=task_id)
    return [r for r in runs if r.role == MERGE_ROLE and r.status in ACTIVE]


async def void_after(log: AuditWriter, entry: AuditEntry, exc: Exception) -> None:
    """Say in the log that `entry` did not take effect; the effect's error stays the one raised."""
    try:
        await log.void(entry, str(exc) or type(exc).__name__)
    except Exception as unvoided:  # noqa: BLE001 - the effect's error is the one to report
        exc.add_note(f"the audit log could not say so either: {unvoided}")


async def land_once(worktrees: Worktrees, trial: TrialMerge) -> str:
    """Land `trial` unless it is a merge git already has (`already_landed`)."""
    if trial.path is None:
        return trial.commit
    return await worktrees.merges.land(trial)


async def already_landed(worktrees: Worktrees, task: Task) -> TrialMerge | None:
    """The merge to record when the commit REVIEW approved is already in the default branch
    (a merge whose record was lost, or one made outside T25): nothing for git to do."""
    from core.workspace.trial_merge import TrialMerge

    head = await merged_already(worktrees, task)
    if head is None or task.reviewed_head is None:
        return None
    return TrialMerge(
        task_id=task.id,
        branch=task.branch,
        commit=head,
        base=head,
        tip=task.reviewed_head,
        path=None,
    )


async def record_landed(
    store: Store, write: DecisionWrite, trial: TrialMerge, patience_s: float
) -> tuple[Task, list[Event]]:
    """Record the merge git has landed; tried again while the store is away, for at most
    `patience_s`. A try whose reply was lost is found (the task is merged), not made twice."""
    waited = False

    async def once(n: int) -> tuple[Task, list[Event]]:
        nonlocal waited
        if n:
            found = await store.get_task(write.task_id)
            if found is not None and found.merged:
                return found, []  # an earlier try committed; only its reply was lost
        try:
            return await store.apply_decision(write)
        except StoreUnavailable as exc:
            if not waited:
                waited = True
                log.warning(
                    "t25: the merge of %s landed as %s; the store is away (%s): recording it "
                    "as soon as it answers",
                    write.task_id,
                    trial.commit[:12],
                    exc.message,
                )
            raise

    try:
        return await retry(
            once,
            pauses=PAUSES.within(patience_s),
            transient=lambda exc: isinstance(exc, StoreUnavailable),
        )
    except StoreUnavailable as exc:
        raise MergeUnrecorded(
            f"the merge of {write.task_id} landed as {trial.commit[:12]}, but the store could "
            f"not record it for {patience_s:g} s ({exc.message})",
            hint=f"once the store answers, `t25 merge {write.task_id}` records it",
        ) from exc


async def may_merge(store: Store, keys: Keyring, task: Task, decision: Decision) -> None:
    """The merge's gates, the same however it is made (here, by a worker, by the forge):
    not held, checks passed and review approved as T25's sealed records say, each protected
    path the change touches named. PolicyRefused or MergeRefused, nothing written."""
    not_held(task, "merged")
    mergeable(task)
    await require_sealed_merge(store, keys, task)
    protected_named(task, decision)


def merge_took_effect(task: Task, entry: AuditEntry, at: datetime) -> DecisionWrite:
    """A merge made elsewhere (a worker's, the forge's) taking effect in the store under its
    audit line `entry`: the task marked merged, with the line's announcement."""
    announce = DecisionRecorded(
        at=at,
        task_id=task.id,
        decision=entry.decision,
        actor=entry.actor,
        reason=entry.reason,
        bound_to=entry.bound_to,
    )
    return DecisionWrite(
        task_id=task.id,
        expected=task.state,
        change=TaskUpdated(at=at, task_id=task.id, fields={"merged": True}, actor=entry.actor),
        announce=announce,
        fields={"merged": True},
    )


def open_merge_line(entries: list[AuditEntry]) -> AuditEntry | None:
    """The newest merge line among a task's that no line voids: a decision to merge still
    waiting for its effect (a worker's merge under way, or one whose record was lost)."""
    voided = {e.voids for e in entries if e.voids is not None}
    merges = [e for e in entries if e.decision == "merge" and e.seq not in voided]
    return merges[-1] if merges else None
