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

Where the store keeps the chain itself (Postgres: `core.ports.AuditChainStore`), this
file is a mirror of it, and the chain is written and verified in the store instead
(`core.control.audit_chain`, whose docstring says why). The line format and the chain's
check are shared (`core.control.audit_lines`); the file's own writer, and how the end of the
file is found, are in `core.control.audit_file`.

Lines are split on `\\n` only, and written as ASCII JSON, so no other character a reader
might take for a line break (U+2028, U+2029, U+0085) can appear in them. A torn last line
(a write that did not finish, never anchored) found when the log is opened is moved to a
file beside it (`audit.jsonl.torn-<time>`), reported, and the log goes on from the last
whole line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import BinaryIO, Literal, Protocol, overload

from core.control.audit_chain import (
    ChainStore,
    ChainWriter,
    adopt_if_needed,
    sync_mirror,
    take_over,
)
from core.control.audit_chain import verify_chain as _verify_chain
from core.control.audit_cross import CrossCheck
from core.control.audit_file import (
    FileWriter,
    LogEnd,
    find_tail,
    fsync_dir,
    parse_entry,
    unwritable,
)
from core.control.audit_lines import (
    GENESIS,
    VOID,
    verify_lines,
)
from core.control.audit_reading import lines_of, lines_of_path
from core.control.keyring import Keyring
from core.domain.audit import AuditEntry, AuditTrail, Verdict
from core.domain.backoff import Backoff
from core.domain.clock import Clock, system_clock
from core.domain.events import DecisionRecorded
from core.domain.models import AuditAnchor
from core.errors import AuditError
from core.ports import AuditAnchorStore, AuditChainStore, DecisionWrite

__all__ = [
    "GENESIS",
    "VOID",
    "AuditEntry",
    "AuditLog",
    "AuditTrail",
    "AuditWriter",
    "FileWriter",
    "Verdict",
]

LOCK_WAIT_S = 120.0  # a decider waits this long for another to finish before giving up
LOCK_POLL = Backoff(0.002, 0.05)  # ... looking at the lock again after these pauses
TORN = ".torn-"  # set-aside torn lines: audit.jsonl.torn-20250101T120000Z
VERDICT_TTL_S = 10.0  # a page of the trail reuses a verdict this young, if the head is the same

log = logging.getLogger("t25.audit")


def log_path(root: Path) -> Path:
    """Where the audit log of the installation at `root` (t25.yaml's directory) lives."""
    return root / ".factory" / "audit.jsonl"


class AuditWriter(Protocol):
    """The log held by one decider (`AuditLog.writer`): the file's (`FileWriter`) or the
    store's chain (`ChainWriter`). The decider writes its line, puts it in its store write
    (`with_line`), applies that, and says how it went (`anchored`, or `landed` when the
    outcome is unknown); a decision whose effect failed gets a `void`."""

    @property
    def anchor(self) -> AuditAnchor | None: ...

    async def append(
        self,
        *,
        actor: str,
        task: str | None,
        decision: str,
        reason: str = "",
        bound_to: str | None = None,
    ) -> AuditEntry: ...

    async def write(
        self,
        *,
        actor: str,
        task: str | None,
        decision: str,
        reason: str = "",
        bound_to: str | None = None,
    ) -> AuditEntry: ...

    def with_line(self, write: DecisionWrite, entry: AuditEntry) -> DecisionWrite: ...
    def anchored(self, entry: AuditEntry) -> None: ...
    async def landed(self, entry: AuditEntry) -> bool: ...
    async def void(self, entry: AuditEntry, why: str) -> AuditEntry: ...


class AuditLog:
    """Append decisions durably; read and verify the chain against the store's anchor."""

    def __init__(
        self,
        path: Path,
        store: AuditAnchorStore,
        *,
        clock: Clock = system_clock,
        keys: Keyring | None = None,
    ) -> None:
        self.path = path
        self.store = store
        self.keys = keys  # seals each line and checks them (core.control.keyring)
        # The store's own chain, where it keeps one: then `path` is its mirror.
        self.chain: ChainStore | None = store if isinstance(store, AuditChainStore) else None
        self.clock = clock  # stamps each line (`ts`) and each torn line set aside
        self._lock = asyncio.Lock()  # one holder per process; the file lock is for the others
        self._verdict: tuple[object, float, Verdict] | None = None  # (head, when, verdict)

    @asynccontextmanager
    async def writer(self) -> AsyncIterator[AuditWriter]:
        """Hold the log for one decision: no other writer on this log or this store, in any
        process, until the block ends."""
        if self.chain is not None:
            async with self._chain_writer(self.chain) as held:
                yield held
            return
        async with self._lock:
            fh = await self._locked(create=True)
            try:
                release = await self.store.lock_audit()
                try:
                    anchor = await self.store.get_audit_anchor()
                    tail = await asyncio.to_thread(self._open_tail, fh, anchor)
                    yield FileWriter(self, fh, anchor, tail)
                finally:
                    await release()
            finally:
                fh.close()  # and with it the file lock

    async def settle(self) -> int:
        """Void the lines no decider anchored (each stopped before its decision took effect),
        as the next decision would, writing nothing else; how many. Where the store keeps
        the chain a line commits with its effect, so none is ever left over."""
        if self.chain is not None:
            return 0
        async with self.writer() as held:
            assert isinstance(held, FileWriter)
            return await held.settle()

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

    @asynccontextmanager
    async def _chain_writer(self, chain: ChainStore) -> AsyncIterator[AuditWriter]:
        """The store's chain held for one decision (its lock: every process on every host),
        with the mirror's file lock when the mirror can be written; the mirror is brought
        up to date when the decision is done, whatever became of it."""
        async with self._lock:
            fh = await self._mirror()
            try:
                release = await chain.lock_audit()
                try:
                    anchor = await chain.get_audit_anchor()
                    await adopt_if_needed(chain, anchor, self.path)
                    try:
                        yield ChainWriter(chain, anchor, self.clock, self.keys)
                    finally:
                        await self._sync_mirror(chain, fh)
                finally:
                    await release()
            finally:
                if fh is not None:
                    fh.close()

    async def _mirror(self) -> BinaryIO | None:
        """The mirror, open with its lock held; None (and a warning) if it cannot be: the
        chain in the store does not need it."""
        try:
            return await self._locked(create=True)
        except AuditError as exc:
            log.warning("t25: the audit mirror is not kept: %s", exc.message)
            return None

    async def _sync_mirror(self, chain: ChainStore, fh: BinaryIO | None) -> None:
        if fh is None:
            return
        try:
            await sync_mirror(chain, fh, self.path)
        except Exception as exc:  # noqa: BLE001 - the mirror is best effort; verify repairs it
            log.warning("t25: the audit mirror %s was not brought up to date: %s", self.path, exc)

    def entries(self, *, task: str | None = None) -> list[AuditEntry]:
        """Every well-formed entry of the file, oldest first (use `verify` to check the
        chain). Where the store keeps the chain, the file is its mirror: `page` reads the
        store."""
        found = (parse_entry(raw) for _, raw in lines_of_path(self.path))
        return [e for e in found if e is not None and (task is None or e.task == task)]

    async def page(
        self, *, after: int = 0, limit: int | None = None, task: str | None = None
    ) -> list[AuditEntry]:
        """The entries after line `after` (one task's, with `task`), oldest first, at most
        `limit` (None: all of them), from the chain wherever it is kept."""
        if self.chain is None:
            return await asyncio.to_thread(self._page_of_file, after, limit, task)
        out: list[AuditEntry] = []
        while limit is None or len(out) < limit:
            want = 5000 if limit is None else min(5000, limit - len(out))
            lines = await self.chain.audit_lines(after=after, limit=want, task=task)
            out += [AuditEntry.model_validate_json(line.text) for line in lines]
            if len(lines) < want:
                break
            after = lines[-1].seq
        return out

    def _page_of_file(self, after: int, limit: int | None, task: str | None) -> list[AuditEntry]:
        """A page read off the file: line n holds entry n in a whole chain (`verify` says
        when it is not), so the lines before `after` are skipped unparsed, and only the lines
        that can be the task's are parsed."""
        needle = None if task is None else f'"task": {json.dumps(task)}'
        out: list[AuditEntry] = []
        if limit == 0:
            return out
        for _, raw in lines_of_path(self.path, after=after):
            if needle is not None and needle not in raw:
                continue
            entry = parse_entry(raw)
            if entry is None or entry.seq <= after or (task is not None and entry.task != task):
                continue
            out.append(entry)
            if limit is not None and len(out) >= limit:
                break
        return out

    async def trail(
        self, *, task: str | None = None, after: int = 0, limit: int | None = None
    ) -> AuditTrail:
        """The entries (a page of them, with `limit`) and the whole chain's verdict. The
        verdict is reused for VERDICT_TTL_S while the chain's head and the file stay the
        same, so reading a long log page by page verifies it once."""
        pending = await self._take_over()  # before the page: it reads the chain taken over
        entries = await self.page(after=after, limit=limit, task=task)
        more = limit is not None and limit > 0 and len(entries) == limit
        return AuditTrail(
            entries=entries,
            verdict=pending or await self._recent_verdict(),
            next=entries[-1].seq if more else None,
        )

    async def _recent_verdict(self) -> Verdict:
        key = (await self.store.get_audit_anchor(), await asyncio.to_thread(_stat, self.path))
        cached, now = self._verdict, time.monotonic()
        if cached is not None and cached[0] == key and now - cached[1] < VERDICT_TTL_S:
            return cached[2]
        verdict = await self.verify()
        key = (await self.store.get_audit_anchor(), await asyncio.to_thread(_stat, self.path))
        self._verdict = (key, time.monotonic(), verdict)
        return verdict

    async def verify(self) -> Verdict:
        """The chain held against the anchor; a torn tail is set aside first, and named.
        Where the store keeps the chain: the chain there, and this file as its mirror."""
        if self.chain is not None:
            async with self._lock:
                fh = await self._mirror()
                try:
                    if (pending := await self._take_over()) is not None:
                        return pending
                    anchor = await self.chain.get_audit_anchor()
                    return await _verify_chain(self.chain, anchor, fh, self.path, self.keys)
                finally:
                    if fh is not None:
                        fh.close()
        async with self._lock:
            fh = await self._locked(create=False)
            try:
                anchor = await self.store.get_audit_anchor()
                held, note = await asyncio.to_thread(self._settled, fh, anchor)
            finally:
                if fh is not None:
                    fh.close()
        verdict = await asyncio.to_thread(self._walk_file, held, anchor)
        aside = await asyncio.to_thread(self.set_aside)
        if aside:
            note += (
                f"; {len(aside)} torn line{'s' if len(aside) > 1 else ''} (never anchored) "
                f"set aside beside it, the newest in {aside[-1].name}"
            )
        return dataclasses.replace(verdict, message=verdict.message + note)

    async def _take_over(self) -> Verdict | None:
        """Where the store keeps the chain, an earlier T25's log not yet in it is taken over
        first (`core.control.audit_chain.take_over`); the verdict when it cannot be."""
        return None if self.chain is None else await take_over(self.chain, self.path)

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
            raise unwritable(self.path, exc) from exc
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
            fsync_dir(self.path.parent)  # make the new directory entry durable too
        try:
            return open(self.path, "r+b", buffering=0)  # held until the writer ends
        except FileNotFoundError:
            if create:
                raise
            return None

    def _open_tail(self, fh: BinaryIO, anchor: AuditAnchor | None) -> LogEnd:
        """Find where the log ends; set a torn tail aside (or refuse if it was anchored)."""
        tail = find_tail(fh, anchor)
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
                raise unwritable(self.path, exc) from exc
        return tail

    def _settled(
        self, fh: BinaryIO | None, anchor: AuditAnchor | None
    ) -> tuple[tuple[BinaryIO, int] | None, str]:
        """The log as it stands under its lock: a handle of its own and where it ends, with a
        torn, never-anchored tail set aside first (or left out and named, when it cannot be
        moved). T25 only adds lines past that end, so the walk needs no lock."""
        if fh is None:
            return None, ""
        note, end = "", None
        tail = find_tail(fh, anchor)
        if tail.torn_and_never_anchored(anchor):
            try:
                self._move_aside(fh, tail)
            except OSError as exc:
                note = (
                    f"; line {tail.next_line} is a torn write (never anchored) that could "
                    f"not be set aside: {exc.strerror or exc}"
                )
                end = tail.end
        size = os.fstat(fh.fileno()).st_size if end is None else end
        return (open(self.path, "rb"), size), note  # closed by _walk_file

    def _walk_file(self, held: tuple[BinaryIO, int] | None, anchor: AuditAnchor | None) -> Verdict:
        """The chain walked line by line up to where the log ended, a chunk read at a time."""
        if held is None:
            return verify_lines([], anchor, self.keys)
        reader, end = held
        with reader:
            return verify_lines(lines_of(reader, end), anchor, self.keys)

    def _move_aside(self, fh: BinaryIO, tail: LogEnd) -> None:
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
            fsync_dir(self.path.parent)
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


def cross_check(entries: list[AuditEntry], recorded: list[DecisionRecorded]) -> list[str]:
    """What the log and the store disagree on (`core.control.audit_cross`), of entries and
    decisions held in memory."""
    check = CrossCheck(e.voids for e in entries if e.decision == VOID and e.voids is not None)
    for e in entries:
        check.entry(e.model_dump())
    for event in recorded:
        check.decision(event)
    return check.problems()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_size, found.st_mtime_ns
