"""What an operator's decision writes in the store: its change (a legal, sealed move of the
task, or an update of its fields), its announcement, and the run it queues — one
`DecisionWrite`, applied by the store in one transaction (its anchor is added once its audit
line is written)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from core.control.moves import legal_move
from core.control.verb_rules import Ruling
from core.domain.decisions import Decision
from core.domain.events import DecisionRecorded, Event, TaskUpdated
from core.domain.models import NewRun, Task
from core.domain.states import STAGE_ROLE
from core.ports import DecisionWrite

if TYPE_CHECKING:
    from core.control.keyring import Keyring


def decision_write(
    task: Task, decision: Decision, ruling: Ruling, *, at: datetime, keys: Keyring
) -> DecisionWrite:
    """What `decision`, ruled `ruling` on `task`, writes, stamped `at`; a move sealed with `keys`."""
    change: Event
    if ruling.to is None:
        fields = ruling.fields
        change = TaskUpdated(at=at, task_id=task.id, fields=fields, actor=decision.actor)
    else:
        change, fields = legal_move(
            task,
            ruling.to,
            actor=decision.actor,
            reason=ruling.why,
            fields=ruling.fields,
            keys=keys,
            at=at,
            reset=ruling.reset,
        )
    announce = DecisionRecorded(
        at=at,
        task_id=task.id,
        decision=decision.verb.value,
        actor=decision.actor,
        reason=ruling.reason(decision),
        bound_to=ruling.bound_to,
    )
    enqueue = None
    if ruling.enqueue and ruling.to is not None:
        enqueue = NewRun(task_id=task.id, stage=ruling.to, role=STAGE_ROLE[ruling.to])
    return DecisionWrite(
        task_id=task.id,
        expected=task.state,
        change=change,
        announce=announce,
        fields=fields,
        enqueue=enqueue,
        cancel_runs=ruling.cancel_runs,
    )
