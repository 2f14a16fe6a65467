"""The audit log's chain and anchor catch every kind of tampering, and name the line; no
character in a decision, no torn write and no lost anchor move leaves the log unreadable."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from core.control.audit import AuditLog
from core.errors import AuditError, StaleState
from store import open_store


@pytest.fixture
async def log(tmp_path: Path):
    store = await open_store(f"sqlite:///{tmp_path / 't25.db'}")
    audit = AuditLog(tmp_path / ".factory" / "audit.jsonl", store)
    for n, decision in enumerate(["approve", "reject", "cancel", "retry", "merge"], start=1):
        await audit.append(actor="ana", task=f"T-{n}", decision=decision, reason=f"why {n}")
    yield audit
    await store.close()


def _lines(log: AuditLog) -> list[str]:
    return log.path.read_text().splitlines()


def _write(log: AuditLog, lines: list[str]) -> None:
    log.path.write_text("".join(line + "\n" for line in lines))


async def test_an_untouched_log_verifies(log):
    verdict = await log.verify()
    assert verdict.ok and verdict.lines == 5
    assert [e.decision for e in log.entries()] == ["approve", "reject", "cancel", "retry", "merge"]
    assert [e.task for e in log.entries(task="T-3")] == ["T-3"]


async def test_an_edited_line_is_named(log):
    lines = _lines(log)
    lines[2] = lines[2].replace("why 3", "why not")
    _write(log, lines)
    verdict = await log.verify()
    assert not verdict.ok and verdict.bad_line == 3 and "edited" in verdict.message


async def test_a_deleted_line_is_named(log):
    lines = _lines(log)
    del lines[1]
    _write(log, lines)
    verdict = await log.verify()
    assert not verdict.ok and verdict.bad_line == 2


async def test_reordered_lines_are_named(log):
    lines = _lines(log)
    lines[3], lines[4] = lines[4], lines[3]
    _write(log, lines)
    verdict = await log.verify()
    assert not verdict.ok and verdict.bad_line == 4


async def test_truncation_is_caught_by_the_anchor(log):
    _write(log, _lines(log)[:3])
    verdict = await log.verify()
    assert not verdict.ok and "truncated" in verdict.message and verdict.bad_line == 4


async def test_a_whole_file_rewritten_with_a_fresh_chain_is_caught(log, tmp_path):
    forged_store = await open_store(f"sqlite:///{tmp_path / 'forger.db'}")
    forger = AuditLog(tmp_path / "forged.jsonl", forged_store)
    for n in range(1, 6):
        await forger.append(actor="mallory", task=f"T-{n}", decision="approve", reason="")
    await forged_store.close()
    log.path.write_bytes(forger.path.read_bytes())
    verdict = await log.verify()
    assert not verdict.ok and verdict.bad_line == 5 and "rewritten" in verdict.message


async def test_a_line_appended_outside_t25_is_not_anchored(log):
    lines = _lines(log)
    tail = json.loads(lines[-1])
    forged = dict(tail, seq=6, prev=tail["hash"], decision="approve")
    _write(log, [*lines, json.dumps(forged)])
    verdict = await log.verify()
    assert not verdict.ok and verdict.bad_line == 6


async def test_appending_continues_the_chain_and_moves_the_anchor(log):
    entry = await log.append(actor="bo", task="T-9", decision="archive", reason="")
    assert entry.seq == 6 and entry.prev == json.loads(_lines(log)[4])["hash"]
    anchor = await log.store.get_audit_anchor()
    assert (anchor.seq, anchor.hash) == (6, entry.hash)
    assert (await log.verify()).ok


async def test_a_damaged_tail_is_not_extended(log):
    _write(log, [*_lines(log)[:-1], "{not json"])
    with pytest.raises(AuditError, match="damaged"):
        await log.append(actor="bo", task="T-1", decision="cancel")


# -- line breaks that are not "\n" ----------------------------------------------------------

SEPARATORS = ["\u2028", "\u2029", "\x85"]


async def test_separators_in_a_reason_or_actor_are_escaped_and_the_chain_verifies(log):
    for n, sep in enumerate(SEPARATORS, start=6):
        await log.append(actor=f"bo{sep}", task=f"T-{n}", decision="cancel", reason=f"a{sep}b")
    raw = log.path.read_bytes()
    assert raw.isascii() and raw.count(b"\n") == 8
    assert (await log.verify()).ok
    assert [e.reason for e in log.entries()[5:]] == [f"a{sep}b" for sep in SEPARATORS]

    lines = raw.decode().split("\n")[:-1]
    lines[6] = lines[6].replace("cancel", "approve")  # tampering after them is still seen
    _write(log, lines)
    verdict = await log.verify()
    assert not verdict.ok and verdict.bad_line == 7 and "edited" in verdict.message


# -- a line that did not finish, a line never anchored, an anchor that would not move ----------


async def test_a_torn_tail_is_set_aside_and_the_log_goes_on(log):
    whole = log.path.read_bytes()
    with log.path.open("ab") as fh:
        fh.write(b'{"seq": 6, "ts": "2025-01-01T12:0')  # a write cut short
    entry = await log.append(actor="bo", task="T-6", decision="cancel", reason="again")
    assert entry.seq == 6 and entry.prev == json.loads(whole.splitlines()[-1])["hash"]
    (aside,) = log.set_aside()
    assert aside.parent == log.path.parent and aside.name.startswith("audit.jsonl.torn-")
    assert aside.read_bytes() == b'{"seq": 6, "ts": "2025-01-01T12:0'
    assert log.path.read_bytes().startswith(whole)
    verdict = await log.verify()
    assert verdict.ok and verdict.lines == 6 and aside.name in verdict.message


async def test_verify_sets_a_torn_tail_aside_rather_than_calling_it_tampering(log):
    with log.path.open("ab") as fh:
        fh.write(b'{"seq": 6')
    verdict = await log.verify()
    assert verdict.ok and verdict.lines == 5 and "set aside" in verdict.message
    assert len(log.set_aside()) == 1


async def test_a_line_no_one_anchored_is_voided_by_the_next_decision(log):
    lines = _lines(log)
    tail = json.loads(lines[-1])
    body = dict(tail, seq=6, prev=tail["hash"], task="T-6", decision="approve")
    del body["hash"]
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    body["hash"] = hashlib.sha256(canonical.encode()).hexdigest()
    _write(log, [*lines, json.dumps(body)])  # as a decider killed before anchoring leaves it
    assert not (await log.verify()).ok

    entry = await log.append(actor="bo", task="T-7", decision="cancel")
    assert entry.seq == 8
    void = log.entries()[6]
    assert (void.decision, void.voids, void.task, void.actor) == ("void", 6, "T-6", "t25")
    assert "never anchored" in void.reason
    assert (await log.verify()).ok


async def test_a_line_whose_anchor_will_not_move_is_cut_back(log, tmp_path):
    # A second checkout's log on the same store moves the anchor under this one's feet.
    other = AuditLog(tmp_path / "elsewhere" / "audit.jsonl", log.store)
    before = log.path.read_bytes()
    async with log.writer() as writer:
        await other.append(actor="cy", task="T-1", decision="cancel")
        with pytest.raises(StaleState):
            await writer.append(actor="bo", task="T-6", decision="cancel")
    assert log.path.read_bytes() == before


# -- the log against the store ------------------------------------------------------------------


def test_cross_check_matches_lines_and_decisions_and_skips_voided_lines():
    from datetime import UTC, datetime

    from core.control.audit import VOID, cross_check
    from core.domain.audit import AuditEntry
    from core.domain.events import DecisionRecorded

    at = datetime(2026, 1, 1, tzinfo=UTC)

    def line(seq: int, decision: str, task: str = "T-1", voids: int | None = None) -> AuditEntry:
        return AuditEntry(
            seq=seq,
            ts=at,
            actor="ana",
            task=task,
            decision=decision,
            reason="",
            prev="x",
            hash="y",
            voids=voids,
        )

    def event(decision: str, task: str = "T-1") -> DecisionRecorded:
        return DecisionRecorded(id=7, task_id=task, decision=decision, actor="ana", reason="")

    entries = [line(1, "cancel"), line(2, "merge", "T-2"), line(3, VOID, None, voids=2)]
    assert cross_check(entries, [event("cancel")]) == []
    assert cross_check(entries, []) == ["line 1: cancel of T-1 by ana has no effect in the store"]
    assert cross_check(entries, [event("cancel"), event("retry", "T-3")]) == [
        "T-3: retry by ana (event 7) is in the store with no audit line"
    ]


async def test_the_trail_pages_through_the_file_with_a_cursor(log):
    seen, after = [], 0
    for _ in range(10):
        trail = await log.trail(after=after, limit=2)
        assert trail.verdict.ok and trail.verdict.head.seq == 5
        seen += [e.seq for e in trail.entries]
        if trail.next is None:
            break
        after = trail.next
    assert seen == [1, 2, 3, 4, 5]
    only = await log.trail(task="T-4", limit=3)
    assert [(e.seq, e.task) for e in only.entries] == [(4, "T-4")] and only.next is None
    assert (await log.trail(limit=0)).entries == []


async def test_a_page_reuses_the_verdict_only_while_the_log_and_its_anchor_stay_the_same(log):
    assert (await log.trail(limit=1)).verdict.ok
    lines = _lines(log)
    lines[1] = lines[1].replace("why 2", "why not")
    _write(log, lines)
    verdict = (await log.trail(after=1, limit=1)).verdict
    assert not verdict.ok and verdict.bad_line == 2
