"""The audit log's chain and anchor catch every kind of tampering, and name the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.audit import AuditLog
from core.errors import AuditError
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
