"""The audit log: every operator decision, append-only, hash-chained and anchored.

Each decision (approve, reject, merge, cancel, retry, archive, answer) is one JSON line in
`.factory/audit.jsonl`. A line carries the hash of the line before it and its own hash
over everything else it holds, so editing, deleting or reordering a line breaks the chain.
The newest line's sequence number and hash are also kept in the store (the anchor), so a
truncated file — or a whole file rewritten with a fresh, self-consistent chain — no longer
matches. A decision is acknowledged only after its line is fsync'ed and anchored.

Writers in several processes are serialised by an exclusive lock on the file.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from core.errors import AuditError
from core.models import AuditAnchor, utcnow
from core.store import Store

GENESIS = "0" * 64
DECISIONS = frozenset({"approve", "reject", "merge", "cancel", "retry", "archive", "answer"})


class AuditEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    ts: datetime
    actor: str
    task: str | None
    decision: str
    reason: str
    prev: str
    hash: str

    def anchor(self) -> AuditAnchor:
        return AuditAnchor(seq=self.seq, hash=self.hash)


def _digest(fields: dict) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _seal(seq: int, prev: str, *, actor: str, task: str | None, decision: str, reason: str) -> str:
    body = {
        "seq": seq, "ts": utcnow().isoformat(), "actor": actor, "task": task,
        "decision": decision, "reason": reason, "prev": prev,
    }
    return json.dumps({**body, "hash": _digest(body)}, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Verdict:
    """The outcome of `t25 audit verify`: ok, or the first bad line and what is wrong."""

    ok: bool
    lines: int
    message: str
    bad_line: int | None = None


class AuditLog:
    """Append decisions durably; read and verify the chain against the store's anchor."""

    def __init__(self, path: Path, store: Store) -> None:
        self.path = path
        self.store = store
        self._lock = asyncio.Lock()

    async def append(
        self, *, actor: str, task: str | None, decision: str, reason: str = ""
    ) -> AuditEntry:
        if decision not in DECISIONS:
            raise ValueError(f"unknown decision {decision!r}")
        async with self._lock:
            anchor = await self.store.get_audit_anchor()
            try:
                line = await asyncio.to_thread(
                    self._write_line, actor=actor, task=task, decision=decision, reason=reason
                )
            except OSError as exc:
                raise AuditError(
                    f"could not write the audit log {self.path}: {exc.strerror or exc}",
                    hint="check the disk and permissions of .factory/; the decision was not recorded",
                ) from exc
            entry = AuditEntry.model_validate_json(line)
            await self.store.set_audit_anchor(entry.anchor(), previous=anchor)
            return entry

    def _write_line(self, *, actor: str, task: str | None, decision: str, reason: str) -> str:
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                last = _last_line(fh)
                if last is None:
                    seq, prev = 1, GENESIS
                else:
                    try:
                        tail = json.loads(last)
                        seq, prev = int(tail["seq"]) + 1, str(tail["hash"])
                    except (ValueError, KeyError, TypeError):
                        raise AuditError(
                            f"the last line of {self.path} is damaged; refusing to extend it",
                            hint="run `t25 audit verify` to see what is wrong",
                        ) from None
                line = _seal(seq, prev, actor=actor, task=task, decision=decision, reason=reason)
                fh.seek(0, os.SEEK_END)
                fh.write(line.encode() + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        if created:  # make the new directory entry durable too
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return line

    def entries(self, *, task: str | None = None) -> list[AuditEntry]:
        """Every well-formed entry, oldest first (use `verify` to check the chain)."""
        out = []
        for _, raw in _read_lines(self.path):
            try:
                entry = AuditEntry.model_validate_json(raw)
            except (ValueError, ValidationError):
                continue
            if task is None or entry.task == task:
                out.append(entry)
        return out

    async def snapshot(self, *, task: str | None = None) -> tuple[list[AuditEntry], Verdict]:
        """The entries and the chain's verdict together, read off the event loop."""
        return await asyncio.to_thread(self.entries, task=task), await self.verify()

    async def verify(self) -> Verdict:
        anchor = await self.store.get_audit_anchor()
        return await asyncio.to_thread(verify_lines, _read_lines(self.path), anchor)


def verify_lines(lines: list[tuple[int, str]], anchor: AuditAnchor | None) -> Verdict:
    """Walk the chain line by line, then hold its end against the anchor."""
    prev, count = GENESIS, 0
    for number, raw in lines:
        def bad(why: str, number: int = number) -> Verdict:
            return Verdict(False, len(lines), f"line {number}: {why}", bad_line=number)

        try:
            fields = json.loads(raw)
            entry = AuditEntry.model_validate(fields)
        except (ValueError, ValidationError):
            return bad("is not a well-formed audit entry")
        if entry.seq != number:
            return bad(f"has sequence number {entry.seq}; lines were deleted or reordered")
        if entry.prev != prev:
            return bad("does not follow the line before it; a line was deleted, reordered or edited")
        body = {k: v for k, v in fields.items() if k != "hash"}
        if _digest(body) != entry.hash:
            return bad("its content does not match its hash; the line was edited")
        prev, count = entry.hash, number
    if anchor is None:
        if count:
            return Verdict(False, count, f"the store holds no anchor but the log has {count} lines",
                           bad_line=1)
        return Verdict(True, 0, "the audit log is empty")
    if count < anchor.seq:
        return Verdict(False, count, f"truncated: the store anchors line {anchor.seq}, "
                       f"the log ends at line {count}", bad_line=count + 1)
    anchored_hash = json.loads(lines[anchor.seq - 1][1])["hash"]
    if anchored_hash != anchor.hash:
        return Verdict(False, count, f"line {anchor.seq}: does not match the hash anchored in the "
                       "store; the log was rewritten", bad_line=anchor.seq)
    if count > anchor.seq:
        return Verdict(False, count, f"line {anchor.seq + 1}: was never anchored in the store "
                       "(appended outside T25, or written by a process that stopped before "
                       "acknowledging it)", bad_line=anchor.seq + 1)
    return Verdict(True, count, f"{count} entries, chain intact, anchored at line {count}")


def _read_lines(path: Path) -> list[tuple[int, str]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace")
    return list(enumerate(text.splitlines(), start=1))


def _last_line(fh) -> str | None:
    """The file's last non-empty line, read backwards from the end in blocks."""
    fh.seek(0, os.SEEK_END)
    end = fh.tell()
    buf, pos = b"", end
    while pos > 0:
        step = min(8192, pos)
        pos -= step
        fh.seek(pos)
        buf = fh.read(step) + buf
        stripped = buf.rstrip(b"\n")
        if b"\n" in stripped:
            return stripped.rsplit(b"\n", 1)[1].decode()
    stripped = buf.rstrip(b"\n")
    return stripped.decode() if stripped else None
