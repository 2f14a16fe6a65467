"""The audit log: every operator decision, recorded before it takes effect, hash-chained and anchored.

Each decision (approve, reject, merge, cancel, retry, archive, answer) is one JSON line in
`.factory/audit.jsonl`. A line carries the hash of the line before it and its own hash
over every field it holds, so editing, deleting or reordering a line breaks the chain.
The newest line's sequence number and hash are also kept in the store (the anchor), so a
truncated file — or a whole file rewritten with a fresh, self-consistent chain — no longer
matches. Optional fields are written only when set (`bound_to`: what a decision was made
on, such as the approved plan's `sha256:…`; `voids`: see below), so lines written before
they existed verify as they always did.

A decision is written first and takes effect after: `AuditLog.writer` holds the log for one
decision at a time — an exclusive lock on the file for every process on this checkout,
and the store's `lock_audit` for every process sharing the store — while the decider
checks the task, appends its line (fsync'ed), and applies it. The anchor moves in the
same store transaction as the decision's effect (`Store.apply_decision`), so an anchored
line is a decision that took effect; a decision with an effect outside the store (a
merge changes git) anchors its line before that effect instead. A line that cannot be
written is truncated away again, so the log stays whole and the decision changes
nothing. A decision whose effect then fails is followed by a `void` line from T25 saying
so and why, as is a line found anchored by no one (its decider stopped before its
decision took effect).

Lines are split on `\\n` only, and written as ASCII JSON, so no other character a reader
might take for a line break (U+2028, U+2029, U+0085) can appear in them. A torn last line
(a write that did not finish, never anchored) found when the log is opened is moved to a
file beside it (`audit.jsonl.torn-<time>`), reported, and the log goes on from the last
whole line.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Literal, overload

from pydantic import ValidationError

from core.domain.audit import AuditEntry, AuditTrail, Verdict
from core.domain.backoff import Backoff
from core.domain.clock import Clock, system_clock
from core.domain.decisions import Verb
from core.domain.events import DecisionRecorded
from core.domain.models import AuditAnchor
from core.domain.text import MAX_REASON, printable
from core.errors import AuditError
from core.ports import AuditAnchorStore

__all__ = ["AuditEntry", "AuditLog", "AuditTrail", "AuditWriter", "Verdict"]

GENESIS = "0" * 64
DECISIONS = frozenset(verb.value for verb in Verb)
_OPTIONAL = frozenset({"bound_to", "voids"})  # written only when set
VOID = "void"  # T25's own line: the decision on line `voids` did not take effect
T25_ACTOR = "t25"
LOCK_WAIT_S = 120.0  # a decider waits this long for another to finish before giving up
LOCK_POLL = Backoff(0.002, 0.05)  # ... looking at the lock again after these pauses
TORN = ".torn-"  # set-aside torn lines: audit.jsonl.torn-20250101T120000Z

log = logging.getLogger("t25.audit")


def log_path(root: Path) -> Path:
    """Where the audit log of the installation at `root` (t25.yaml's directory) lives."""
    return root / ".factory" / "audit.jsonl"


def _digest(fields: dict[str, object]) -> str:
    # The canonical form hashed is independent of how the line is escaped on disk.
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _seal(seq: int, prev: str, ts: datetime, fields: Mapping[str, object]) -> dict[str, object]:
    """A line's fields (`actor`, `task`, `decision`, `reason`, and `bound_to` and `voids`
    only when set) with its place in the chain, its time and its hash."""
    body: dict[str, object] = {"seq": seq, "ts": ts.isoformat(), "prev": prev}
    body.update((k, v) for k, v in fields.items() if v is not None or k not in _OPTIONAL)
    return {**body, "hash": _digest(body)}


def _line(fields: dict[str, object]) -> bytes:
    """One line as written: ASCII JSON (every other character escaped), then `\\n`."""
    return json.dumps(fields, sort_keys=True, ensure_ascii=True).encode() + b"\n"


def _entry(raw: bytes | str) -> AuditEntry | None:
    try:
        return AuditEntry.model_validate_json(raw)
    except (ValueError, ValidationError):
        return None


@dataclass
class _Tail:
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


class AuditLog:
    """Append decisions durably; read and verify the chain against the store's anchor."""

    def __init__(self, path: Path, store: AuditAnchorStore, *, clock: Clock = system_clock) -> None:
        self.path = path
        self.store = store
        self.clock = clock  # stamps each line (`ts`) and each torn line set aside
        self._lock = asyncio.Lock()  # one holder per process; the file lock is for the others

    @asynccontextmanager
    async def writer(self) -> AsyncIterator[AuditWriter]:
        """Hold the log for one decision: no other writer on this log or this store, in any
        process, until the block ends."""
        async with self._lock:
            fh = await self._locked(create=True)
            try:
                release = await self.store.lock_audit()
                try:
                    anchor = await self.store.get_audit_anchor()
                    tail = await asyncio.to_thread(self._open_tail, fh, anchor)
                    yield AuditWriter(self, fh, anchor, tail)
                finally:
                    await release()
            finally:
                fh.close()  # and with it the file lock

    async def append(
        self,
        *,
        actor: str,
        task: str | None,
        decision: str,
        reason: str = "",
        bound_to: str | None = None,
    ) -> AuditEntry:
        """Write one decision's line on its own (a decider that needs no effect applied)."""
        async with self.writer() as w:
            return await w.append(
                actor=actor, task=task, decision=decision, reason=reason, bound_to=bound_to
            )

    def entries(self, *, task: str | None = None) -> list[AuditEntry]:
        """Every well-formed entry, oldest first (use `verify` to check the chain)."""
        found = (_entry(raw) for _, raw in _split(_read(self.path)))
        return [e for e in found if e is not None and (task is None or e.task == task)]

    async def trail(self, *, task: str | None = None) -> AuditTrail:
        """The entries and the chain's verdict together, read off the event loop."""
        entries = await asyncio.to_thread(self.entries, task=task)
        return AuditTrail(entries=entries, verdict=await self.verify())

    async def verify(self) -> Verdict:
        """The chain held against the anchor; a torn tail is set aside first, and named."""
        async with self._lock:
            fh = await self._locked(create=False)
            try:
                anchor = await self.store.get_audit_anchor()
                lines, note = await asyncio.to_thread(self._settled_lines, fh, anchor)
            finally:
                if fh is not None:
                    fh.close()
        verdict = verify_lines(lines, anchor)
        aside = await asyncio.to_thread(self.set_aside)
        if aside:
            note += (
                f"; {len(aside)} torn line{'s' if len(aside) > 1 else ''} (never anchored) "
                f"set aside beside it, the newest in {aside[-1].name}"
            )
        return Verdict(verdict.ok, verdict.lines, verdict.message + note, verdict.bad_line)

    def set_aside(self) -> list[Path]:
        """The files torn lines were moved to, oldest first."""
        return sorted(self.path.parent.glob(f"{self.path.name}{TORN}*"))

    # -- the file, under its lock ---------------------------------------------------------

    @overload
    async def _locked(self, *, create: Literal[True]) -> BinaryIO: ...
    @overload
    async def _locked(self, *, create: bool) -> BinaryIO | None: ...
    async def _locked(self, *, create: bool) -> BinaryIO | None:
        """The log open with its exclusive lock held (None: no log yet, and not `create`)."""
        try:
            fh = await asyncio.to_thread(self._open, create)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        if fh is None:
            return None
        try:
            # Polled rather than blocking a thread: a cancelled waiter must not take the lock later.
            loop = asyncio.get_running_loop()
            pauses, deadline = LOCK_POLL.pauses(), loop.time() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fh
                except BlockingIOError:
                    if loop.time() > deadline:
                        raise AuditError(
                            f"another T25 process has held the audit log {self.path} for "
                            f"{LOCK_WAIT_S:.0f} s",
                            hint="try again when its decision is done",
                        ) from None
                    await asyncio.sleep(next(pauses))
        except BaseException:
            fh.close()
            raise

    def _open(self, create: bool) -> BinaryIO | None:
        if create and not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644))
            _fsync_dir(self.path.parent)  # make the new directory entry durable too
        try:
            return open(self.path, "r+b", buffering=0)  # held until the writer ends
        except FileNotFoundError:
            if create:
                raise
            return None

    def _unwritable(self, exc: OSError) -> AuditError:
        return AuditError(
            f"could not write the audit log {self.path}: {exc.strerror or exc}",
            hint="free space on its disk or fix its permissions; "
            "the decision was not recorded and changed nothing",
        )

    def _open_tail(self, fh: BinaryIO, anchor: AuditAnchor | None) -> _Tail:
        """Find where the log ends; set a torn tail aside (or refuse if it was anchored)."""
        tail = _find_tail(fh, anchor)
        if tail.torn and not tail.torn_and_never_anchored(anchor):
            raise AuditError(
                f"line {tail.next_line} of {self.path} is damaged, and the store anchors line "
                f"{anchor.seq if anchor else 0}; refusing to extend it",
                hint="run `t25 audit verify` to see what is wrong",
            )
        if tail.torn:
            try:
                self._move_aside(fh, tail)
            except OSError as exc:
                raise self._unwritable(exc) from exc
        return tail

    def _settled_lines(
        self, fh: BinaryIO | None, anchor: AuditAnchor | None
    ) -> tuple[list[tuple[int, str]], str]:
        """The lines to verify, with a torn, never-anchored tail set aside (or left out and
        named, when it cannot be moved)."""
        if fh is None:
            return [], ""
        note = ""
        tail = _find_tail(fh, anchor)
        if tail.torn_and_never_anchored(anchor):
            try:
                self._move_aside(fh, tail)
            except OSError as exc:
                note = (
                    f"; line {tail.next_line} is a torn write (never anchored) that could "
                    f"not be set aside: {exc.strerror or exc}"
                )
                fh.seek(0)
                return _split(fh.read()[: tail.end]), note
        fh.seek(0)
        return _split(fh.read()), note

    def _move_aside(self, fh: BinaryIO, tail: _Tail) -> None:
        """Copy the torn bytes to a file beside the log (durably), then cut them off it."""
        stamp = f"{self.clock():%Y%m%dT%H%M%S}Z"
        for n in range(1000):
            side = self.path.with_name(f"{self.path.name}{TORN}{stamp}{f'-{n}' if n else ''}")
            try:
                out = open(side, "xb")  # noqa: SIM115 - closed just below
            except FileExistsError:
                continue
            try:
                with out:
                    out.write(tail.torn)
                    out.flush()
                    os.fsync(out.fileno())
            except OSError:
                side.unlink(missing_ok=True)
                raise
            _fsync_dir(self.path.parent)
            os.ftruncate(fh.fileno(), tail.end)
            os.fsync(fh.fileno())
            log.warning(
                "t25: the audit log's last line was torn (a write that did not finish, "
                "never anchored); moved to %s",
                side,
            )
            tail.torn = b""
            return
        raise FileExistsError(f"no free name for a torn line beside {self.path}")


class AuditWriter:
    """The log held by one decider (`AuditLog.writer`): append lines, void one.

    A line is anchored one of two ways. `append` anchors it itself, at once: for a
    decision whose effect is outside the store (a merge changes git first). `write`
    leaves that to the decider, who moves the anchor in the very transaction that
    applies the decision (`Store.apply_decision`, with `anchor_after`), then says how it
    went: `anchored`, or `landed` to ask the store when the transaction's outcome is
    unknown. Either way the line is fsync'ed before anything changes.
    """

    def __init__(
        self, audit: AuditLog, fh: BinaryIO, anchor: AuditAnchor | None, tail: _Tail
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

    async def _write(self, fields: dict[str, object]) -> AuditEntry:
        """Append `fields` as the next line (after voids for any lines no decider anchored),
        durably; the tail moves past it, the anchor does not."""
        tail, now = self._tail, self._audit.clock()
        seq, prev = (1, GENESIS) if tail.last is None else (tail.last.seq + 1, tail.last.hash)
        lines: list[dict[str, object]] = []
        for orphan in tail.unanchored:  # first: lines no decider anchored took no effect
            never_anchored = {
                "actor": T25_ACTOR,
                "task": orphan.task,
                "decision": VOID,
                "voids": orphan.seq,
                "reason": f"the {orphan.decision} on line {orphan.seq} did not take effect: it "
                "was never anchored (its decider stopped before acknowledging it)",
            }
            lines.append(_seal(seq, prev, now, never_anchored))
            seq, prev = seq + 1, str(lines[-1]["hash"])
        lines.append(_seal(seq, prev, now, fields))
        data = b"".join(_line(fields) for fields in lines)
        try:
            await asyncio.to_thread(_append_durably, self._fh, data, tail.end)
        except OSError as exc:
            raise self._audit._unwritable(exc) from exc
        entry = AuditEntry.model_validate(lines[-1])
        self._tail = _Tail(last=entry, end=tail.end + len(data))
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


def _find_tail(fh: BinaryIO, anchor: AuditAnchor | None) -> _Tail:
    """The last whole line and what follows it. Usually one backward read of the last
    line; the whole file only when its end is torn or runs past the anchor."""
    size = fh.seek(0, os.SEEK_END)
    raw = _last_line(fh, size)
    if not raw:
        return _Tail(last=None, end=0)
    last = _entry(raw[:-1]) if raw.endswith(b"\n") else None
    if last is not None and (anchor is None or last.seq <= anchor.seq):
        return _Tail(last=last, end=size)
    fh.seek(0)
    return _tail_of(fh.read(), anchor)


def _tail_of(data: bytes, anchor: AuditAnchor | None) -> _Tail:
    """The tail found by reading the whole log: the last whole line, the torn bytes after
    it, and the lines after the anchor."""
    pieces = data.split(b"\n")  # the last piece: b"", or a line without its newline
    entries = [_entry(p) for p in pieces[:-1]]
    whole = len(entries)
    while whole and entries[whole - 1] is None:
        whole -= 1
    end = sum(len(p) + 1 for p in pieces[:whole])
    last = entries[whole - 1] if whole else None
    return _Tail(last, end, data[end:], _unanchored(entries[:whole], anchor))


def _unanchored(entries: list[AuditEntry | None], anchor: AuditAnchor | None) -> list[AuditEntry]:
    """The whole lines after the anchored one, when the anchored line is what the store
    says and every line after it is well-formed (otherwise: damage, for `verify`)."""
    if anchor is None or not 0 < anchor.seq < len(entries):
        return []
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


def cross_check(entries: list[AuditEntry], recorded: list[DecisionRecorded]) -> list[str]:
    """What the log and the store disagree on: a line whose decision left no
    `DecisionRecorded` in the store, and a decision the store holds that no line records,
    by task and line. A voided line, and T25's voiding lines, are meant to have no effect."""
    voided = {e.voids for e in entries if e.decision == VOID}
    pending: dict[tuple[object, ...], list[DecisionRecorded]] = {}
    for event in recorded:
        key = (event.task_id, event.decision, event.actor, event.reason, event.bound_to)
        pending.setdefault(key, []).append(event)
    problems = []
    for e in entries:
        if e.decision == VOID or e.seq in voided:
            continue
        matching = pending.get((e.task, e.decision, e.actor, e.reason, e.bound_to))
        if matching:
            matching.pop(0)
        else:
            problems.append(
                f"line {e.seq}: {e.decision} of {e.task} by {printable(e.actor)} "
                "has no effect in the store"
            )
    for events in pending.values():
        problems += [
            f"{ev.task_id}: {ev.decision} by {printable(ev.actor)} (event {ev.id}) is in the "
            "store with no audit line"
            for ev in events
        ]
    return problems


def verify_lines(lines: list[tuple[int, str]], anchor: AuditAnchor | None) -> Verdict:
    """Walk the chain line by line, then hold its end against the anchor."""
    broken = _broken_link(lines)
    if broken is not None:
        return broken
    return _against_anchor(lines, anchor)


def _broken_link(lines: list[tuple[int, str]]) -> Verdict | None:
    """The first line that is malformed, out of place, or not what its hash says."""
    prev = GENESIS
    for number, raw in lines:
        try:
            fields = json.loads(raw)
            entry = AuditEntry.model_validate(fields)
        except (ValueError, ValidationError):
            why = "is not a well-formed audit entry"
        else:
            body = {k: v for k, v in fields.items() if k != "hash"}
            if entry.seq != number:
                why = f"has sequence number {entry.seq}; lines were deleted or reordered"
            elif entry.prev != prev:
                why = "does not follow the line before it; a line was deleted, reordered or edited"
            elif _digest(body) != entry.hash:
                why = "its content does not match its hash; the line was edited"
            else:
                prev = entry.hash
                continue
        return Verdict(False, len(lines), f"line {number}: {why}", bad_line=number)
    return None


def _against_anchor(lines: list[tuple[int, str]], anchor: AuditAnchor | None) -> Verdict:
    """A whole chain of `lines`, held against the store's anchor: it must end exactly there."""
    count = len(lines)
    if anchor is None:
        if count:
            return Verdict(
                False, count, f"the store holds no anchor but the log has {count} lines", bad_line=1
            )
        return Verdict(True, 0, "the audit log is empty")
    if count < anchor.seq:
        return Verdict(
            False,
            count,
            f"truncated: the store anchors line {anchor.seq}, the log ends at line {count}",
            bad_line=count + 1,
        )
    if json.loads(lines[anchor.seq - 1][1])["hash"] != anchor.hash:
        return Verdict(
            False,
            count,
            f"line {anchor.seq}: does not match the hash anchored in the "
            "store; the log was rewritten",
            bad_line=anchor.seq,
        )
    if count > anchor.seq:
        return Verdict(
            False,
            count,
            f"line {anchor.seq + 1}: was never anchored in the store "
            "(appended outside T25, or written by a process that stopped before "
            "acknowledging it)",
            bad_line=anchor.seq + 1,
        )
    return Verdict(True, count, f"{count} entries, chain intact, anchored at line {count}")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _split(data: bytes) -> list[tuple[int, str]]:
    """Numbered lines, split on `\\n` alone: U+2028, U+2029 and U+0085 are characters."""
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return [(n, p.decode("utf-8", errors="replace")) for n, p in enumerate(pieces, start=1)]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
