"""A task's sealed history: what T25 itself decided about it, which no row can overrule.

The merge gate used to read the task's row - `state`, `checks_passed`, `review_verdict`,
`reviewed_head` - and anyone who can write the store can write a row: an agent that reached
a Postgres set its own task DONE with its review approved and its reviewed head NULL, and the
merge took the unreviewed code. So every state change T25 makes carries its facts and T25's
seal of them (core.control.keyring) in its `TaskTransitioned` event: QA passing records the
head its checks ran on, REVIEW approving the head it approved, DOCS the documentation commit
made on that head. The gate replays those sealed events in order and decides on them:

- the last sealed state is DONE, and the row says the same;
- the required checks passed (the QA run's transition into REVIEW) on the very head the
  review approved (the REVIEW run's transition into PR_OPEN); a DOCS commit, T25's own, may
  stand on top of it;
- the row's reviewed head is that head (or that DOCS commit): a NULL one never merges.

A transition without a seal, since the key was made, or with a seal that is not T25's, or
one that does not follow the state the history had reached, is named: `t25 merge` refuses the
task and `t25 audit verify` reports it. A task whose gates were passed before T25 sealed
them needs `t25 recheck` (QA and review again, sealed this time).

    transition_seal(keys, task, from, to, facts) -> the seal a move carries (core.control.moves)
    replay(task_id, events, keys)                 -> SealedHistory
    merge_blocker(task, history)                  -> why the records do not allow a merge
    require_sealed_merge(store, keys, task)       PolicyRefused when they do not
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.control.keyring import Keyring
from core.control.task_events import events_of_kinds
from core.domain.events import Event, TaskTransitioned
from core.domain.models import Task, TaskState
from core.errors import PolicyRefused
from core.ports import Store

# The row's fields a gate decides on, recorded in the transition that sets them.
GATE_FIELDS = ("checks_passed", "review_verdict", "reviewed_head")
# And facts that are no column: the head QA's checks ran on.
CHECKED_HEAD = "checked_head"


def sealed_text(task_id: str, from_state: str, to_state: str, facts: Mapping[str, Any]) -> bytes:
    body = {"task": task_id, "from": from_state, "to": to_state, "facts": dict(facts)}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return b"t25-transition:" + canonical.encode()


def transition_seal(
    keys: Keyring, task_id: str, from_state: str, to_state: str, facts: Mapping[str, Any]
) -> str:
    return keys.seal(sealed_text(task_id, from_state, to_state, facts))


@dataclass
class SealedHistory:
    """A task as its sealed transitions leave it."""

    state: TaskState | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    approved_head: str | None = None  # the head REVIEW approved, before any DOCS commit
    problems: list[str] = field(default_factory=list)
    sealed: int = 0  # transitions that carried T25's seal


def replay(task_id: str, events: Iterable[Event], keys: Keyring) -> SealedHistory:
    """The sealed transitions of `task_id` in order; each problem named, and left out."""
    history = SealedHistory()
    for event in events:
        if not isinstance(event, TaskTransitioned) or event.task_id != task_id:
            continue
        move = f"{event.from_state} → {event.to_state} (event {event.id})"
        if event.seal is None:
            if event.at >= keys.created:
                history.problems.append(f"{move} carries no seal: T25 did not write it")
            continue  # older than the key: T25 had not begun sealing
        text = sealed_text(task_id, event.from_state, event.to_state, event.facts)
        if (why := keys.problem(text, event.seal)) is not None:
            history.problems.append(f"{move}: {why}")
            continue
        if history.state is not None and event.from_state is not history.state:
            history.problems.append(
                f"{move} does not follow {history.state}, where T25's history had left it"
            )
        history.sealed += 1
        history.state = event.to_state
        history.facts.update(event.facts)
        if event.facts.get("review_verdict") == "approve" and event.to_state is TaskState.PR_OPEN:
            history.approved_head = event.facts.get("reviewed_head")
    return history


def row_disagreement(task: Task, history: SealedHistory) -> str | None:
    """How the task's row differs from what its sealed history says, or None."""
    if history.sealed == 0:
        return None  # nothing sealed to hold it to (a task from before the key)
    if history.state is not task.state:
        return f"its row says {task.state}, its sealed history {history.state}"
    for name in GATE_FIELDS:
        if name in history.facts and history.facts[name] != getattr(task, name):
            return (
                f"its row says {name} {getattr(task, name)!r}, its sealed history "
                f"{history.facts[name]!r}"
            )
    return None


def merge_blocker(task: Task, history: SealedHistory) -> str | None:
    """Why T25's own records do not allow merging `task` as its row stands, or None."""
    if history.problems:
        return f"its history holds a record T25 did not write: {history.problems[0]}"
    if history.sealed == 0:
        return "its checks and review were recorded before T25 sealed its gates"
    if (differs := row_disagreement(task, history)) is not None:
        return f"{differs}: the row was written outside T25"
    facts = history.facts
    if facts.get("checks_passed") is not True or facts.get("review_verdict") != "approve":
        return "its sealed history holds no passed checks and approving review"
    if not task.reviewed_head:
        return "it has no reviewed head: no review is bound to the commit it would merge"
    if history.approved_head is None or facts.get(CHECKED_HEAD) != history.approved_head:
        return (
            f"its checks ran on {str(facts.get(CHECKED_HEAD))[:12]}, not on the head the review "
            f"approved ({str(history.approved_head)[:12]})"
        )
    return None


async def sealed_history(store: Store, keys: Keyring, task: Task) -> SealedHistory:
    """`task` as its sealed transitions, read from its events, leave it."""
    events = await events_of_kinds(store, task.id, TaskTransitioned)
    return replay(task.id, events, keys)


async def sealed_blocker(store: Store, keys: Keyring, task: Task) -> str | None:
    """Why T25's records do not allow merging `task`, read from its events; or None."""
    return merge_blocker(task, await sealed_history(store, keys, task))


async def require_sealed_merge(store: Store, keys: Keyring, task: Task) -> None:
    """PolicyRefused unless T25's own sealed records allow merging `task` as it stands."""
    if (why := await sealed_blocker(store, keys, task)) is not None:
        raise PolicyRefused(
            f"{task.id} cannot be merged: {why}",
            hint=f"t25 recheck {task.id} runs QA and review again, on the branch as it is",
        )
