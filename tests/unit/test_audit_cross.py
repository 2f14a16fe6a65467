"""The audit log and the store's decisions are held against each other a page at a time: the
same disagreements as with everything in memory, whatever the pages, with only the unmatched
kept between them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from core.control import audit_cross
from core.control.audit import cross_check
from core.control.audit_cross import CrossCheck, disagreements
from core.domain.audit import AuditEntry
from core.domain.events import DecisionRecorded

AT = datetime(2026, 1, 1, tzinfo=UTC)


def entry(seq: int, decision: str, task: str = "T-1", **more: object) -> AuditEntry:
    fields = {"actor": "ana", "reason": "", "prev": "0", "hash": "0", **more}
    return AuditEntry.model_validate(
        {"seq": seq, "ts": AT, "task": task, "decision": decision, **fields}
    )


def event(n: int, decision: str, task: str = "T-1", actor: str = "ana") -> DecisionRecorded:
    return DecisionRecorded(id=n, at=AT, task_id=task, decision=decision, actor=actor)


def paged(items: list, size: int):
    async def read() -> AsyncIterator[list]:
        for i in range(0, len(items), size):
            yield items[i : i + size]

    return read


def texts(entries: list[AuditEntry]) -> list[str]:
    return [json.dumps(e.model_dump(mode="json")) for e in entries]


# A log and a store that disagree in each way, with a voided line whose fields are those of a
# later decision that did take effect (the voided line must not take its event).
ENTRIES = [
    entry(1, "approve"),
    entry(2, "cancel", "T-2"),
    entry(3, "approve"),  # voided on line 4: the second approve's event is line 5's
    entry(4, "void", voids=3, actor="t25"),
    entry(5, "approve"),
    entry(6, "merge", "T-3"),  # no effect: named with its repair
    entry(7, "retry", "T-2"),
    entry(8, "cancel", "T-2"),  # its event is missing: the store holds only one cancel
]
EVENTS = [
    event(10, "approve"),
    event(11, "cancel", "T-2"),
    event(12, "approve"),
    event(13, "retry", "T-2"),
    event(14, "archive", "T-4", actor="mallory"),  # no line
    event(15, "reject", "T-5"),  # no line
]
EXPECTED = [
    (
        "line 6: merge of T-3 by ana has no effect in the store: `t25 merge T-3` records it "
        "if the default branch holds it"
    ),
    "line 8: cancel of T-2 by ana has no effect in the store",
    "T-4: archive by mallory (event 14) is in the store with no audit line",
    "T-5: reject by ana (event 15) is in the store with no audit line",
]


def test_everything_in_memory_finds_each_disagreement():
    assert cross_check(ENTRIES, EVENTS) == EXPECTED


@pytest.mark.parametrize("lines", [1, 2, 3, 8])
@pytest.mark.parametrize("decisions", [1, 2, 6])
async def test_page_by_page_finds_the_same_whatever_the_pages(lines: int, decisions: int):
    found = await disagreements(paged(texts(ENTRIES), lines), paged(EVENTS, decisions))
    assert found == EXPECTED


async def test_a_voided_line_that_took_an_event_is_walked_again_knowing_it():
    # Line 1's event reaches the check before line 2 voids it: the walk starts over.
    walks = []

    def lines():
        walks.append(1)
        return paged(
            texts([entry(1, "approve"), entry(2, "void", voids=1), entry(3, "approve")]), 1
        )()

    found = await disagreements(lines, paged([event(10, "approve")], 1))
    assert found == [] and len(walks) == 2


async def test_only_the_unmatched_are_kept_between_pages(monkeypatch: pytest.MonkeyPatch):
    # A long log whose every line has its event: what the check holds stays small.
    n = 3000
    log = texts([entry(seq, "approve", f"T-{seq}") for seq in range(1, n + 1)])
    store = [event(seq, "approve", f"T-{seq}") for seq in range(1, n + 1)]
    held: list[int] = []
    feed = CrossCheck.line

    def line(check: CrossCheck, raw: str) -> None:
        feed(check, raw)
        held.append(len(check._where) + sum(map(len, check._events.values())))

    monkeypatch.setattr(audit_cross.CrossCheck, "line", line)
    assert await disagreements(paged(log, 100), paged(store, 100)) == []
    assert len(held) == n and max(held) <= 200
