"""The audit log file as the chain: the writer that appends to it, and where it ends.

Where the log file is the chain (the embedded SQLite store; `core.control.audit` says how a
decision is recorded), a decider's `FileWriter` appends its line at the end found under the
file's lock, fsync'ed, and the anchor in the store moves to it: in the decider's own
transaction, or here (`append`, `void`). A line whose anchor does not move is cut off the
file again. Finding the end is usually one backward read of the last line; the whole file is
read only when its end is torn or runs past the anchor, and then the lines no decider
anchored are voided by the next one (`LogEnd.unanchored`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from pydantic import ValidationError

from core.control.audit_lines import DECISIONS, GENESIS, T25_ACTOR, VOID, encode, seal
from core.domain.audit import AuditEntry
from core.domain.models import AuditAnchor
from core.domain.text import MAX_REASON, printable
from core.errors import AuditError
from core.ports import AuditAnchorStore, DecisionWrite

if TYPE_CHECKING:
    from pathlib import Path

    from core.control.keyring import Keyring
    from core.domain.clock import Clock


class LogFile(Protocol):
    """What a file writer needs of the log it writes (core.control.audit.AuditLog)."""

    path: Path
    store: AuditAnchorStore
    keys: Keyring | None
    clock: Clock


log = logging.getLogger("t25.audit")


def parse_entry(raw: bytes | str) -> AuditEntry | None:
    try:
        return AuditEntry.model_validate_json(raw)
    except (ValueError, ValidationError):
        return None


@dataclass
class LogEnd:
    """Where the log ends, as a writer finds it under the lock."""

    last: AuditEntry | None  # the last whole line
    end: int  # the byte offset after it: where the next line goes
    torn: bytes = b""  # what follows it, if anything: a write that did not finish
    unanchored: list[AuditEntry] = field(default_factory=list)  # whole lines after the anchor

    def torn_and_never_anchored(self, anchor: AuditAnchor | None) -> bool:
        """A torn tail beyond the anchored line: a write that did not finish. (One at or
        before it is damage to a line T25 acknowledged.)"""
        return bool(self.torn) and (anchor is None or self.next_line > anchor.seq)

    @property
    def next_line(self) -> int:
        return (self.last.seq if self.last else 0) + 1


class FileWriter:
    """The log file held by one decider (`AuditLog.writer`): append lines, void one.

    A line is anchored one of two ways. `append` anchors it itself, at once: for a
    decision whose effect is outside the store (a merge changes git first). `write`
    leaves that to the decider, who moves the anchor in the very transaction that
    applies the decision (`Store.apply_decision`, with `anchor_after`), then says how it
    went: `anchored`, or `landed` to ask the store when the transaction's outcome is
    unknown. Either way the line is fsync'ed before anything changes.
    """

    def __init__(
        self, audit: LogFile, fh: BinaryIO, anchor: AuditAnchor | None, tail: LogEnd
    ) -> None:
        self._audit, self._fh, self._anchor, self._tail = audit, fh, anchor, tail
        self._undo = tail  # where the log ended before the last write

    @property
    def anchor(self) -> AuditAnchor | None:
        """Where the store's anchor is: the line a new anchor moves on from."""
        return self._anchor

    async def append(
        self,
        *,
        actor: str,
        task: str | None,
        decision: str,
        reason: str = "",
        bound_to: str | None = None,
    ) -> AuditEntry:
        """The decision's line, fsync'ed and anchored; AuditError (nothing kept) otherwise."""
        entry = await self.write(
            actor=actor, task=task, decision=decision, reason=reason, bound_to=bound_to
        )
        await self._anchor_now(entry)
        return entry

    async def write(
        self,
        *,
        actor: str,
        task: str | None,
        decision: str,
        reason: str = "",
        bound_to: str | None = None,
    ) -> AuditEntry:
        """The decision's line, fsync'ed but not anchored yet: the decider moves the anchor
        with its effect. AuditError (nothing kept) if it cannot be written."""
        if decision not in DECISIONS:
            raise ValueError(f"unknown decision {decision!r}")
        return await self._write(
            {
                "actor": actor,
                "task": task,
                "decision": decision,
                "reason": reason,
                "bound_to": bound_to,
            }
        )

    def with_line(self, write: DecisionWrite, entry: AuditEntry) -> DecisionWrite:
        """`write` moving the store's anchor to `entry`, the line already in the file."""
        return dataclasses.replace(write, anchor=entry.anchor(), previous=self._anchor)

    def anchored(self, entry: AuditEntry) -> None:
        """The decider's transaction moved the store's anchor to `entry`."""
        self._anchor = entry.anchor()

    async def landed(self, entry: AuditEntry) -> bool:
        """Whether the store's anchor is at `entry` after all (a transaction that committed
        but whose reply was lost); if so, it counts as anchored."""
        if await _holds(self._audit.store, entry.anchor()):
            self.anchored(entry)
            return True
        return False

    async def void(self, entry: AuditEntry, why: str) -> AuditEntry:
        """Say in the log that the decision on `entry`'s line did not take effect, and why."""
        reason = f"the {entry.decision} on line {entry.seq} did not take effect: {why}"
        line = await self._write(
            {
                "actor": T25_ACTOR,
                "task": entry.task,
                "decision": VOID,
                "reason": printable(reason)[:MAX_REASON],
                "voids": entry.seq,
            }
        )
        await self._anchor_now(line)
        return line

    async def settle(self) -> int:
        """Void the lines no decider anchored (each decider stopped before its decision took
        effect), writing nothing else; how many there were."""
        if not self._tail.unanchored:
            return 0
        *earlier, last = self._tail.unanchored  # `_write` voids the earlier ones first
        self._tail = dataclasses.replace(self._tail, unanchored=earlier)
        await self._anchor_now(await self._write(_never_anchored(last)))
        return len(earlier) + 1

    async def _write(self, fields: dict[str, object]) -> AuditEntry:
        """Append `fields` as the next line (after voids for any lines no decider anchored),
        durably; the tail moves past it, the anchor does not."""
        tail, now = self._tail, self._audit.clock()
        seq, prev = (1, GENESIS) if tail.last is None else (tail.last.seq + 1, tail.last.hash)
        lines: list[dict[str, object]] = []
        for orphan in tail.unanchored:  # first: lines no decider anchored took no effect
            lines.append(seal(seq, prev, now, _never_anchored(orphan), self._audit.keys))
            seq, prev = seq + 1, str(lines[-1]["hash"])
        lines.append(seal(seq, prev, now, fields, self._audit.keys))
        data = b"".join(encode(fields) for fields in lines)
        try:
            await asyncio.to_thread(_append_durably, self._fh, data, tail.end)
        except OSError as exc:
            raise unwritable(self._audit.path, exc) from exc
        entry = AuditEntry.model_validate(lines[-1])
        self._tail = LogEnd(last=entry, end=tail.end + len(data))
        self._undo = tail  # where the log ended before this write, if its anchor fails
        return entry

    async def _anchor_now(self, entry: AuditEntry) -> None:
        """Move the store's anchor to the line just written; if it does not move, the line
        is cut back off the log and the error raised (the log stays whole)."""
        store, before = self._audit.store, self._undo
        try:
            await store.set_audit_anchor(entry.anchor(), previous=self._anchor)
        except BaseException as exc:
            if not await _holds(store, entry.anchor()):  # else it landed; only the reply was lost
                await asyncio.to_thread(_cut_back, self._fh, before.end)
                self._tail = before
                raise
            if not isinstance(exc, Exception):
                raise
        self._anchor = entry.anchor()


def _never_anchored(orphan: AuditEntry) -> dict[str, object]:
    """T25's void of a line no decider anchored."""
    return {
        "actor": T25_ACTOR,
        "task": orphan.task,
        "decision": VOID,
        "voids": orphan.seq,
        "reason": f"the {orphan.decision} on line {orphan.seq} did not take effect: it "
        "was never anchored (its decider stopped before acknowledging it)",
    }


async def _holds(store: AuditAnchorStore, anchor: AuditAnchor) -> bool:
    try:
        return await store.get_audit_anchor() == anchor
    except Exception:  # noqa: BLE001 - unknown counts as not landed: the line is cut back
        return False


def _append_durably(fh: BinaryIO, data: bytes, end: int) -> None:
    """Write `data` at `end` and fsync it; on failure, cut the file back to `end`."""
    try:
        written = 0
        while written < len(data):
            written += os.pwrite(fh.fileno(), data[written:], end + written)
        os.fsync(fh.fileno())
    except OSError:
        _cut_back(fh, end)
        raise


def _cut_back(fh: BinaryIO, end: int) -> None:
    try:
        os.ftruncate(fh.fileno(), end)
        os.fsync(fh.fileno())
    except OSError as exc:  # the next writer finds a torn tail and sets it aside
        log.warning("t25: could not cut the audit log back after a failed write: %s", exc)


def find_tail(fh: BinaryIO, anchor: AuditAnchor | None, *, orphans: bool = True) -> LogEnd:
    """The last whole line and what follows it. Usually one backward read of the last
    line; the whole file only when its end is torn or runs past the anchor (with no anchor:
    has lines), to find the lines no decider anchored (`orphans`; a mirror has none)."""
    size = fh.seek(0, os.SEEK_END)
    raw = _last_line(fh, size)
    if not raw:
        return LogEnd(last=None, end=0)
    last = parse_entry(raw[:-1]) if raw.endswith(b"\n") else None
    if last is not None and (last.seq <= (anchor.seq if anchor else 0) or not orphans):
        return LogEnd(last=last, end=size)
    fh.seek(0)
    return _tail_of(fh.read(), anchor)


def _tail_of(data: bytes, anchor: AuditAnchor | None) -> LogEnd:
    """The tail found by reading the whole log: the last whole line, the torn bytes after
    it, and the lines after the anchor."""
    pieces = data.split(b"\n")  # the last piece: b"", or a line without its newline
    entries = [parse_entry(p) for p in pieces[:-1]]
    whole = len(entries)
    while whole and entries[whole - 1] is None:
        whole -= 1
    end = sum(len(p) + 1 for p in pieces[:whole])
    last = entries[whole - 1] if whole else None
    return LogEnd(last, end, data[end:], _unanchored(entries[:whole], anchor))


def _unanchored(entries: list[AuditEntry | None], anchor: AuditAnchor | None) -> list[AuditEntry]:
    """The whole lines after the anchored one, when the anchored line is what the store
    says and every line after it is well-formed (otherwise: damage, for `verify`). With no
    anchor yet, every line of a log that starts the chain: the first decision's decider
    stopped before acknowledging it."""
    if anchor is None:
        first = entries[0] if entries else None
        if first is None or (first.seq, first.prev) != (1, GENESIS):
            return []
        after = entries
    elif not 0 < anchor.seq < len(entries):
        return []
    else:
        at, after = entries[anchor.seq - 1], entries[anchor.seq :]
        if at is None or at.hash != anchor.hash:
            return []
    whole = [e for e in after if e is not None]
    return whole if len(whole) == len(after) else []


def _last_line(fh: BinaryIO, size: int) -> bytes:
    """The file's last line with its newline if it has one, read backwards in blocks."""
    buf, pos = b"", size
    while pos > 0:
        step = min(8192, pos)
        pos -= step
        fh.seek(pos)
        buf = fh.read(step) + buf
        cut = buf.rfind(b"\n", 0, len(buf) - 1)
        if cut >= 0:
            return buf[cut + 1 :]
    return buf


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unwritable(path: Path, exc: OSError) -> AuditError:
    """The error of a log line that could not be written: nothing changed."""
    return AuditError(
        f"could not write the audit log {path}: {exc.strerror or exc}",
        hint="free space on its disk or fix its permissions; "
        "the decision was not recorded and changed nothing",
    )
