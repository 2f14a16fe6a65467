"""What the audit log and the store disagree on, found line by line.

`t25 audit verify` holds every decision line against the `DecisionRecorded` events of the
store: a line whose decision left no event, and an event no line records, are reported. A
line and an event match when they name the same task, decision, actor, reason and plan
(`bound_to`); among lines and events that match each other, the first line takes the first
event, the second the second, and so on. A voided line, and T25's voiding lines, are meant
to have no effect and take none.

Both sides are read a page at a time, side by side (the log from its start, the events
from the store's index of decisions), and only what has not found its match yet is kept:
memory follows the disagreements, not the length of the log. A `void` names a line before
it; a voided line that had already taken an event is rare (the event belongs to another
decision with the same fields), and then the walk starts over knowing it, so the result is
the same as when every void is known beforehand.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

from core.control.audit_lines import VOID
from core.control.audit_reading import lines_of_path, pages
from core.domain.events import DecisionRecorded
from core.domain.text import printable
from core.ports import AuditChainStore, EventLog

PAGE = 1000  # lines, or decisions, read at a time

Key = tuple[object, ...]  # task, decision, actor, reason, bound_to
Lines = Callable[[], AsyncIterator[list[str]]]  # the log's lines, oldest first, from its start
Decisions = Callable[[], AsyncIterator[list[DecisionRecorded]]]  # the store's, oldest first


class CrossCheck:
    """The matching, fed lines and events in any interleaving; what is left unmatched."""

    def __init__(self, voided: Iterable[int] = ()) -> None:
        self.voided = set(voided)  # lines known to be voided before they are fed
        self.revisit: set[int] = set()  # voided lines that had already taken an event
        self.lines_fed = self.decisions_fed = 0
        self._seq = 0  # the newest line fed
        self._lines: dict[Key, deque[tuple[int, str, str | None, str]]] = {}
        self._where: dict[int, Key] = {}  # each unmatched line's key
        self._events: dict[Key, deque[DecisionRecorded]] = {}

    def line(self, raw: str) -> None:
        """One line of the log, as written."""
        try:
            fields = json.loads(raw)
        except ValueError:
            return
        if isinstance(fields, dict) and isinstance(fields.get("seq"), int):
            self.entry(fields)

    def entry(self, fields: dict[str, object]) -> None:
        """One line's fields (`seq`, `task`, `decision`, `actor`, `reason`, `bound_to`, `voids`)."""
        seq = fields["seq"]
        assert isinstance(seq, int)
        self._seq = max(self._seq, seq)
        decision = fields.get("decision")
        if decision == VOID:
            voids = fields.get("voids")
            if isinstance(voids, int):
                self._void(voids)
            return
        if seq in self.voided:
            return
        self.lines_fed += 1
        task, actor = fields.get("task"), fields.get("actor")
        key = (task, decision, actor, fields.get("reason"), fields.get("bound_to"))
        if waiting := self._events.get(key):
            waiting.popleft()
            if not waiting:
                del self._events[key]
            return
        line = (seq, str(decision), task if isinstance(task, str) else None, str(actor))
        self._lines.setdefault(key, deque()).append(line)
        self._where[seq] = key

    def decision(self, event: DecisionRecorded) -> None:
        """One decision the store holds as taken effect."""
        self.decisions_fed += 1
        key = (event.task_id, event.decision, event.actor, event.reason, event.bound_to)
        if waiting := self._lines.get(key):
            seq = waiting.popleft()[0]
            del self._where[seq]
            if not waiting:
                del self._lines[key]
            return
        self._events.setdefault(key, deque()).append(event)

    def _void(self, seq: int) -> None:
        if seq in self.voided:
            return
        self.voided.add(seq)
        key = self._where.pop(seq, None)
        if key is not None:
            waiting = self._lines[key]
            waiting.remove(next(line for line in waiting if line[0] == seq))
            if not waiting:
                del self._lines[key]
            self.lines_fed -= 1
        elif seq <= self._seq:
            self.revisit.add(seq)

    def problems(self) -> list[str]:
        """The unmatched lines by line, then the unmatched events by id."""
        lines = sorted(line for waiting in self._lines.values() for line in waiting)
        events = sorted((e for waiting in self._events.values() for e in waiting), key=_id)
        return [*map(_no_effect, lines), *map(_no_line, events)]


async def disagreements(lines: Lines, decisions: Decisions) -> list[str]:
    """Walk the log and the store's decisions side by side: what they disagree on."""
    voided: set[int] = set()
    while True:
        check = CrossCheck(voided)
        await _walk(check, lines(), decisions())
        if not check.revisit:
            return check.problems()
        voided |= check.revisit | check.voided


async def _walk(
    check: CrossCheck,
    lines: AsyncIterator[list[str]],
    decisions: AsyncIterator[list[DecisionRecorded]],
) -> None:
    """Feed the decisions in step with the lines: as many of them as lines so far."""
    more = True
    async for page in lines:
        for raw in page:
            check.line(raw)
        while more and check.decisions_fed < check.lines_fed:
            more = await _feed(check, decisions)
    while more:
        more = await _feed(check, decisions)


async def _feed(check: CrossCheck, decisions: AsyncIterator[list[DecisionRecorded]]) -> bool:
    found = await anext(decisions, None)
    for event in found or ():
        check.decision(event)
    return bool(found)


def file_lines(path: Path) -> Lines:
    """The lines of the log file at `path`, read a page at a time off the event loop."""

    async def read() -> AsyncIterator[list[str]]:
        found = pages(lines_of_path(path), PAGE)
        try:
            while page := await asyncio.to_thread(next, found, None):
                yield [raw for _, raw in page]
        finally:
            found.close()

    return read


def chain_lines(chain: AuditChainStore) -> Lines:
    """The lines of the chain a store keeps, a page at a time by sequence number."""

    async def read() -> AsyncIterator[list[str]]:
        after = 0
        while found := await chain.audit_lines(after=after, limit=PAGE):
            yield [line.text for line in found]
            after = found[-1].seq

    return read


def recorded(store: EventLog) -> Decisions:
    """Every decision the store holds as taken effect, a page at a time by id."""

    async def read() -> AsyncIterator[list[DecisionRecorded]]:
        after = 0
        while found := await store.events_after(after, limit=PAGE, kind=DecisionRecorded.kind):
            yield [e for e in found if isinstance(e, DecisionRecorded)]
            after = found[-1].id or after

    return read


def _id(event: DecisionRecorded) -> int:
    return event.id or 0


def _no_effect(line: tuple[int, str, str | None, str]) -> str:
    seq, decision, task, actor = line
    repair = (
        f": `t25 merge {task}` records it if the default branch holds it"
        if decision == "merge"
        else ""
    )
    return (
        f"line {seq}: {decision} of {task} by {printable(actor)} has no effect in the store{repair}"
    )


def _no_line(event: DecisionRecorded) -> str:
    return (
        f"{event.task_id}: {event.decision} by {printable(event.actor)} (event {event.id}) is in "
        "the store with no audit line"
    )
