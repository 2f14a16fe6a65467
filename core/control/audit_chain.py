"""The audit chain kept in the store, for a store many checkouts share (Postgres).

With the log file primary, every checkout sharing one Postgres database kept its own
`.factory/audit.jsonl` against the one anchor in the store: each read TAMPERED in turn,
and serve's `/audit` missed the other checkouts' decisions. So where the store keeps the
chain (`core.ports.AuditChainStore`), the chain lives there: a decision's line is sealed
from the store's head under the store's audit lock (an advisory lock: every process on
every host takes turns) and inserted in the very transaction that applies its decision
(`DecisionWrite.lines`): the line and its effect commit together, or neither does. The
line is stored as the text it was hashed from, so the store, the mirror and an export hold
the same bytes and one loop verifies them all.

A decision whose effect lies outside the store (a merge changes git) commits its line
first, on its own; then git, then the store. An effect that fails is followed by a `void`
line, as with the file: for a decision whose line had not committed yet, the line and its
void commit together, so the chain tells the same story on every backend.

`.factory/audit.jsonl` becomes a mirror, written after the commit (best effort, under the
file's lock) and brought up to date from the store whenever it lags: a mirror behind,
torn or missing is repaired, not TAMPERED. A mirror that disagrees with the store (a line
edited, or a log this checkout kept on its own before the chain moved into the store) is
reported by `verify` and left as it is.

A store whose anchor was set by a log file before the chain moved in (an installation
upgraded from an earlier T25) holds an anchor but no chain; the first writer on a checkout
whose log ends exactly at that anchor copies that log into the store, and the chain goes on
from it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Protocol

from core.control.audit_file import find_tail
from core.control.audit_lines import (
    DECISIONS,
    GENESIS,
    MAC,
    T25_ACTOR,
    VOID,
    ChainCheck,
    chain_line,
    digest,
    seal,
    sealed_text,
)
from core.control.keyring import Keyring
from core.domain.audit import AuditEntry, ChainLine, Verdict
from core.domain.clock import Clock
from core.domain.models import AuditAnchor
from core.domain.text import MAX_REASON, printable
from core.errors import AuditError
from core.ports import AuditAnchorStore, AuditChainStore, DecisionWrite

log = logging.getLogger("t25.audit")

PAGE = 10_000  # lines read from the store at a time


class ChainStore(AuditChainStore, AuditAnchorStore, Protocol):
    """What the chain's writer and verifier use: the chain and its anchor."""


class ChainWriter:
    """The store's chain held by one decider (`AuditLog.writer`, on a store that keeps the
    chain), with the same calls as the file's writer. A line is staged, not written,
    until a transaction commits it: the decider's own (`with_line`), or the one `append`
    and `void` make."""

    def __init__(
        self, store: ChainStore, anchor: AuditAnchor | None, clock: Clock, keys: Keyring | None
    ) -> None:
        self._store, self._anchor, self._clock, self._keys = store, anchor, clock, keys
        self._staged: list[dict[str, object]] = []  # sealed, not committed yet, oldest first

    @property
    def anchor(self) -> AuditAnchor | None:
        """The chain's head in the store: the line a new one follows."""
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
        """The decision's line, committed on its own (a merge: before git changes anything)."""
        entry = await self.write(
            actor=actor, task=task, decision=decision, reason=reason, bound_to=bound_to
        )
        await self._commit(entry)
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
        """The decision's line, staged: it commits with the decision's effect (`with_line`)."""
        if decision not in DECISIONS:
            raise ValueError(f"unknown decision {decision!r}")
        fields = {"actor": actor, "task": task, "decision": decision, "reason": reason}
        return self._stage({**fields, "bound_to": bound_to})

    def with_line(self, write: DecisionWrite, entry: AuditEntry) -> DecisionWrite:
        """`write` carrying the staged lines up to `entry`, with the anchor moved to it."""
        lines = tuple(chain_line(f) for f in self._staged if _seq(f) <= entry.seq)
        return dataclasses.replace(write, anchor=entry.anchor(), previous=self._anchor, lines=lines)

    def anchored(self, entry: AuditEntry) -> None:
        """The decider's transaction committed the chain up to `entry`."""
        self._anchor = entry.anchor()
        self._staged = [f for f in self._staged if _seq(f) > entry.seq]

    async def landed(self, entry: AuditEntry) -> bool:
        """Whether the chain's head is `entry` after all (a commit whose reply was lost)."""
        try:
            holds = await self._store.get_audit_anchor() == entry.anchor()
        except Exception:  # noqa: BLE001 - unknown counts as not landed
            holds = False
        if holds:
            self.anchored(entry)
        return holds

    async def void(self, entry: AuditEntry, why: str) -> AuditEntry:
        """Say in the chain that `entry`'s decision did not take effect, and why; a line not
        committed yet commits with its void."""
        reason = f"the {entry.decision} on line {entry.seq} did not take effect: {why}"
        line = self._stage(
            {
                "actor": T25_ACTOR,
                "task": entry.task,
                "decision": VOID,
                "reason": printable(reason)[:MAX_REASON],
                "voids": entry.seq,
            }
        )
        await self._commit(line)
        return line

    def _stage(self, fields: dict[str, object]) -> AuditEntry:
        if self._staged:
            seq, prev = _seq(self._staged[-1]) + 1, str(self._staged[-1]["hash"])
        elif self._anchor is not None:
            seq, prev = self._anchor.seq + 1, self._anchor.hash
        else:
            seq, prev = 1, GENESIS
        sealed = seal(seq, prev, self._clock(), fields, self._keys)
        self._staged.append(sealed)
        return AuditEntry.model_validate(sealed)

    async def _commit(self, entry: AuditEntry) -> None:
        """Commit the staged lines up to `entry` in a transaction of their own; lines that do
        not land are dropped, and the error raised."""
        lines = [chain_line(f) for f in self._staged if _seq(f) <= entry.seq]
        try:
            await self._store.append_audit_lines(lines, previous=self._anchor)
        except BaseException as exc:
            if not await self.landed(entry):
                self._staged = []
                raise
            if not isinstance(exc, Exception):
                raise
        self.anchored(entry)


def _seq(fields: dict[str, object]) -> int:
    seq = fields["seq"]
    assert isinstance(seq, int)
    return seq


# -- taking over a log kept before the chain moved into the store -----------------------------


async def adopt_if_needed(store: ChainStore, anchor: AuditAnchor | None, mirror: Path) -> None:
    """Make sure the chain in the store ends at `anchor`. A store anchored by a log file of
    an earlier T25 holds no chain yet: this checkout's log, if it ends exactly at the
    anchor, becomes the chain (AuditError otherwise; nothing is written)."""
    if anchor is None:
        return
    head = await store.audit_lines(after=anchor.seq - 1, limit=1)
    if head and head[0].seq == anchor.seq and head[0].hash == anchor.hash:
        return
    if head or await store.audit_lines(limit=1):
        raise AuditError(
            f"the store's audit chain does not end at its anchor (line {anchor.seq}); "
            "refusing to extend it",
            hint="run `t25 audit verify` to see what is wrong",
        )
    lines = await asyncio.to_thread(_lines_of_file, mirror)
    check = ChainCheck(anchor)
    for n, raw in enumerate(lines, start=1):
        check.feed(n, raw)
    if not check.verdict().ok:
        raise AuditError(
            f"the store anchors line {anchor.seq} of an audit log kept before the chain "
            f"moved into the store, and {mirror} does not end there",
            hint="make the next decision on the checkout whose log does: it moves that "
            "log into the store",
        )
    chain = [_as_kept(raw) for raw in lines]
    await store.append_audit_lines(chain, previous=anchor)
    log.warning("t25: the audit log %s (%d lines) moved into the store", mirror, len(chain))


async def take_over(store: ChainStore, mirror: Path) -> Verdict | None:
    """Before the chain is verified: a store anchored by an earlier T25's log file and
    holding no chain yet takes this checkout's log over, as the next decision would (under
    the store's audit lock). None when that is done or not needed; the verdict to give
    instead of TAMPERED when this checkout's log cannot be taken over (it does not end at
    the anchor): nothing is wrong, the log is elsewhere."""
    if await store.get_audit_anchor() is None or await store.audit_lines(limit=1):
        return None
    release = await store.lock_audit()
    try:
        anchor = await store.get_audit_anchor()
        await adopt_if_needed(store, anchor, mirror)
    except AuditError as exc:
        if await store.audit_lines(limit=1):
            return None  # another process took it over meanwhile, or the chain is damaged
        seq = anchor.seq if anchor else 0
        return Verdict(
            False,
            0,
            f"the audit log of the previous version (line {seq} anchored in the store) has "
            f"not been taken over into the store yet, and cannot be from here: {exc.message}",
            pending=True,
        )
    finally:
        await release()
    return None


def _as_kept(raw: str) -> ChainLine:
    """A line of the log file as the store keeps it: its text exactly as it was (a line
    written before separators were escaped stays as it was, and still verifies)."""
    fields = json.loads(raw)
    task = fields.get("task")
    at = datetime.fromisoformat(fields["ts"])
    return ChainLine(seq=fields["seq"], text=raw, hash=fields["hash"], task=task, at=at)


def _lines_of_file(path: Path) -> list[str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [p.decode("utf-8", errors="replace") for p in data.split(b"\n") if p]


# -- the mirror ---------------------------------------------------------------------------------


async def sync_mirror(store: ChainStore, fh: BinaryIO, mirror: Path) -> int:
    """Bring the mirror (held, locked, in `fh`) up to the store's chain: append what it
    lacks, after cutting off a torn last line. Returns how many lines were added. A mirror
    whose last whole line is not the store's line of that number is left alone
    (`verify_chain` reports it)."""
    tail = await asyncio.to_thread(lambda: find_tail(fh, None, orphans=False))
    last, end = tail.last, tail.end
    after = last.seq if last else 0
    if last is not None:
        at = await store.audit_lines(after=after - 1, limit=1)
        if not at or at[0].seq != after or at[0].hash != last.hash:
            log.warning("t25: the audit mirror %s differs from the store; not updated", mirror)
            return 0
    added = 0
    while lines := await store.audit_lines(after=after, limit=PAGE):
        data = b"".join(line.text.encode() + b"\n" for line in lines)
        await asyncio.to_thread(_write_at, fh, data, end)
        end, after, added = end + len(data), lines[-1].seq, added + len(lines)
    if tail.torn and not added:
        await asyncio.to_thread(os.ftruncate, fh.fileno(), end)
    return added


def _write_at(fh: BinaryIO, data: bytes, end: int) -> None:
    """Write `data` at `end`, cut the file there, and fsync it."""
    written = 0
    while written < len(data):
        written += os.pwrite(fh.fileno(), data[written:], end + written)
    os.ftruncate(fh.fileno(), end + len(data))
    os.fsync(fh.fileno())


# -- verifying -----------------------------------------------------------------------------------


async def verify_chain(
    store: ChainStore,
    anchor: AuditAnchor | None,
    fh: BinaryIO | None,
    mirror: Path,
    keys: Keyring | None = None,
) -> Verdict:
    """The chain in the store, walked line by line and held against its anchor; then the
    mirror held against it, line by line. A mirror behind (or torn, or missing) is brought
    up to date; one that differs is reported."""
    check = ChainCheck(anchor, keys)
    upto = anchor.seq if anchor else 0  # decisions committed meanwhile are for the next verify
    with _MirrorReader(mirror) as reader:
        verdict, differs, behind = await _walk(store, check, reader, upto)
    where = "in the store's chain"
    if not verdict.ok:
        kept = await _mirror_keeps(mirror, verdict.bad_line, keys)
        return dataclasses.replace(verdict, message=f"{verdict.message} ({where}){kept}")
    if (outside := await _added_outside(store, verdict, upto)) is not None:
        return outside
    if differs is not None:
        return await _mirror_differs(mirror, differs, verdict, keys)
    note = ""
    if behind and fh is not None:
        try:
            added = await sync_mirror(store, fh, mirror)
        except OSError as exc:
            note = f"; the mirror {mirror} is behind and could not be brought up: {exc}"
        else:
            note = f"; the mirror was {added} lines behind, brought up to date"
    message = verdict.message.replace("entries,", f"entries {where},", 1)
    return dataclasses.replace(verdict, message=message + note)


async def _mirror_keeps(mirror: Path, bad_line: int | None, keys: Keyring | None) -> str:
    """Of a store's chain that fails at `bad_line`: whether the mirror's line there carries
    T25's seal (the store's chain was rewritten, and the mirror keeps what T25 wrote)."""
    if bad_line is None or keys is None:
        return ""
    raw = await asyncio.to_thread(_mirror_line, mirror, bad_line)
    if raw is None or not _sealed(raw, keys):
        return ""
    return (
        f"; the mirror's line {bad_line} carries T25's seal: the store's chain was "
        f"rewritten, and {mirror} keeps what T25 wrote"
    )


async def _added_outside(store: ChainStore, verdict: Verdict, upto: int) -> Verdict | None:
    """A line past the anchor is a decision committed since, if the anchor (read after the
    line: T25 commits a line and its anchor together) has moved to it; else it was added
    outside T25."""
    beyond = await store.audit_lines(after=upto, limit=1)
    now = await store.get_audit_anchor() if beyond else None
    if not beyond or (now is not None and now.seq >= beyond[0].seq):
        return None
    return Verdict(
        False,
        verdict.lines,
        f"line {beyond[0].seq}: is in the store's chain past its anchor (line "
        f"{now.seq if now else 0}); it was added outside T25",
        bad_line=beyond[0].seq,
        head=verdict.head,
    )


async def _mirror_differs(
    mirror: Path, differs: int, verdict: Verdict, keys: Keyring | None
) -> Verdict:
    """The mirror's line `differs` is not the intact store's: which one to trust."""
    raw = await asyncio.to_thread(_mirror_line, mirror, differs)
    if keys is not None and raw is not None and _sealed(raw, keys):
        why = (
            "both carry T25's seal: the mirror was kept apart from this store (another "
            "installation's log, or a backup restored over it); keep both and compare"
        )
    else:
        why = (
            "the store's line carries T25's seal and the mirror's does not: the mirror "
            "was changed outside T25; the store's chain is the one to trust"
        )
    return Verdict(
        False,
        verdict.lines,
        f"line {differs}: the mirror {mirror} differs from the store's chain, which is "
        f"intact ({verdict.lines} entries); {why}",
        bad_line=differs,
        head=verdict.head,
    )


async def _walk(
    store: ChainStore, check: ChainCheck, reader: _MirrorReader, upto: int
) -> tuple[Verdict, int | None, bool]:
    """The chain's verdict up to line `upto` (the anchor as verify began), the first line
    where the mirror differs, and whether the mirror is behind. (The mirror cannot run
    ahead meanwhile: verify holds its lock, which this checkout's writers take.)"""
    differs: int | None = None
    behind = False
    after = number = 0  # the store's cursor; the lines walked (a deleted row shows as a gap)
    while after < upto:
        found = await store.audit_lines(after=after, limit=PAGE)
        lines = [line for line in found if line.seq <= upto]
        if not lines:
            break
        theirs = await asyncio.to_thread(reader.read, len(lines))
        for i, line in enumerate(lines):
            number += 1
            check.feed(number, line.text)
            mine = theirs[i] if i < len(theirs) else None
            if mine is None or not mine.endswith(b"\n"):
                behind = True
            elif differs is None and (behind or mine[:-1] != line.text.encode()):
                differs = number
        after = lines[-1].seq
        if check.failure is not None:
            break
    verdict = check.verdict()
    if verdict.ok and differs is None and not behind and await asyncio.to_thread(reader.more):
        differs = verdict.lines + 1
    return verdict, differs, behind


def _mirror_line(mirror: Path, seq: int) -> str | None:
    """Line `seq` of the mirror, or None when it has no such line."""
    try:
        with mirror.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if number == seq:
                    return raw.decode("utf-8", "replace").rstrip("\n")
    except OSError:
        return None
    return None


def _sealed(raw: str, keys: Keyring) -> bool:
    """Whether a line is whole (its hash over its fields) and sealed with T25's key."""
    try:
        fields = json.loads(raw)
        claimed, mac = fields.pop("hash"), fields.pop(MAC)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return digest(fields) == claimed and keys.check(sealed_text(str(claimed)), mac)


class _MirrorReader:
    """The mirror's lines, read in step with the store's (through a buffered reader of its
    own: the writer's handle is unbuffered)."""

    def __init__(self, path: Path) -> None:
        try:
            self._fh: BinaryIO | None = open(path, "rb")  # noqa: SIM115 - closed on exit
        except FileNotFoundError:
            self._fh = None

    def __enter__(self) -> _MirrorReader:
        return self

    def __exit__(self, *_: object) -> None:
        if self._fh is not None:
            self._fh.close()

    def read(self, n: int) -> list[bytes]:
        if self._fh is None:
            return []
        out = []
        for _ in range(n):
            raw = self._fh.readline()
            if not raw:
                break
            out.append(raw)
        return out

    def more(self) -> bool:
        return self._fh is not None and bool(self._fh.readline())


__all__ = [
    "ChainLine",
    "ChainStore",
    "ChainWriter",
    "adopt_if_needed",
    "sync_mirror",
    "take_over",
    "verify_chain",
]
