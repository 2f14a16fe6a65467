"""`t25 audit verify` and `t25 audit` on a real checkout, through the binary: a log written
before lines were escaped, and decisions the store and the log disagree on."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

from core.control.audit import GENESIS
from core.domain.models import AuditAnchor
from store import open_store

SEPARATORS = ["\u2028", "\u2029", "\x85"]  # what JSON leaves raw and a terminal breaks on


def _legacy_line(seq: int, prev: str, **fields) -> tuple[str, str]:
    """A line as T25 wrote them before escaping: raw UTF-8, U+2028 and all."""
    body = {"seq": seq, "ts": "2025-01-01T12:00:00+00:00", "prev": prev, **fields}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return json.dumps({**body, "hash": digest}, sort_keys=True, ensure_ascii=False), digest


def test_a_log_written_with_raw_separators_verifies_shows_them_and_catches_later_tampering(
    t25, repo
):
    assert t25("init").code == 0
    for n in (1, 2, 3, 4):
        assert t25("task", "new", f"task {n}").code == 0
    lines, prev = [], GENESIS
    for seq, sep in enumerate(SEPARATORS, start=1):
        line, prev = _legacy_line(
            seq, prev, actor=f"ana{sep}", task=f"T-{seq}", decision="cancel", reason=f"not{sep}now"
        )
        lines.append(line)
    path = repo / ".factory" / "audit.jsonl"
    path.write_bytes("".join(line + "\n" for line in lines).encode())
    asyncio.run(_anchor(repo, AuditAnchor(seq=3, hash=prev)))

    assert t25("--actor", "bo", "cancel", "T-4", "--reason", "later").code == 0
    verify = t25("audit", "verify")
    assert "4 entries, chain intact" in verify.err and "ok" not in verify.out
    # The hand-written lines decided nothing the store knows of: verify says so, by line.
    assert verify.code == 1 and "MISMATCH: line 1: cancel of T-1" in verify.err
    assert "MISMATCH: line 4" not in verify.err
    shown = t25("audit").out.splitlines()
    assert len(shown) == 4
    assert "ana\\u2028" in shown[0] and "not\\u2028now" in shown[0]  # escaped for the terminal
    assert "not\\x85now" in shown[2] and "later" in shown[3]

    data = path.read_bytes().split(b"\n")
    data[3] = data[3].replace(b"later", b"sooner")
    path.write_bytes(b"\n".join(data))
    tampered = t25("audit", "verify")
    assert tampered.code == 1 and "line 4" in tampered.err and "edited" in tampered.err


async def _anchor(repo: Path, anchor: AuditAnchor) -> None:
    store = await open_store(f"sqlite:///{repo / '.factory' / 't25.db'}")
    try:
        await store.set_audit_anchor(anchor, previous=None)
    finally:
        await store.close()


def test_verify_reports_a_decision_in_the_store_with_no_line_and_a_line_with_no_effect(t25, repo):
    assert t25("init").code == 0
    for n in (1, 2):
        assert t25("task", "new", f"task {n}").code == 0
    assert t25("cancel", "T-1", "--reason", "not now").code == 0
    clean = t25("audit", "verify")
    assert clean.code == 0 and "MISMATCH" not in clean.err, clean.err
    asyncio.run(_forge_decision(repo, "T-2"))
    forged = t25("audit", "verify")
    assert forged.code == 1
    assert "MISMATCH: T-2: approve by mallory (event" in forged.err
    assert "is in the store with no audit line" in forged.err


async def _forge_decision(repo: Path, task: str) -> None:
    """A decision written into the store by someone who bypassed T25 (and its audit log)."""
    from core.domain.events import DecisionRecorded

    store = await open_store(f"sqlite:///{repo / '.factory' / 't25.db'}")
    try:
        await store.append_event(
            DecisionRecorded(task_id=task, decision="approve", actor="mallory", reason="")
        )
    finally:
        await store.close()
