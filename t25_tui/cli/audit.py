"""`t25 audit` (with `--json`, `shapes.AuditLogJson`), `t25 audit verify`, `t25 audit export`,
`t25 audit checkpoint` and `t25 audit rotate-key`."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from core.config.schema import Config
from core.control.audit import log_path
from core.control.audit_lines import GENESIS, as_line
from core.control.history import replay, row_disagreement
from core.control.keyring import KEY_FILE, Keyring
from core.domain.audit import AuditEntry, AuditTrail, Verdict
from core.domain.events import Event, TaskTransitioned
from core.domain.models import Task, task_id
from core.domain.text import printable
from core.ports import Operations
from t25_tui.cli.context import run

PAGE = 5000  # events, or audit lines, per read: the most serve gives at once
CSV_COLUMNS = (
    *("seq", "ts", "actor", "task", "decision", "reason", "bound_to", "voids"),
    *("prev", "hash"),
)


def show(args: argparse.Namespace) -> int:
    wanted = task_id(args.task) if args.task else None

    async def body(control: Operations) -> None:
        # A page at a time, so memory follows a page, not the log: the voids first (they
        # name earlier lines), then the lines with what voided each. `--json` prints one
        # document, so it keeps the lines as it reads the voids, in one pass.
        voided: dict[int, int] = {}
        kept: list[AuditEntry] = []
        async for trail in _pages(control, task=wanted):
            voided.update({e.voids: e.seq for e in trail.entries if e.voids is not None})
            verdict = trail.verdict
            if args.json:
                kept += trail.entries
        if args.json:
            from t25_tui.cli.shapes import AuditLogJson  # only for --json

            print(AuditLogJson.of(kept, voided, verdict).text())
            return
        shown = 0
        async for trail in _pages(control, task=wanted):
            for e in trail.entries:
                print(_shown(e, voided.get(e.seq)))
            shown += len(trail.entries)
        if not shown:
            print("no decisions recorded" + (f" for {wanted}" if wanted else ""))

    run(args, body)
    return 0


def _shown(e: AuditEntry, voided_by: int | None) -> str:
    """One line of `t25 audit`."""
    head = f"{e.seq:>5}  {e.ts:%Y-%m-%d %H:%M:%S}  {e.decision:<8} {e.task or '-':<7} "
    parts = [head + printable(e.actor)]
    if e.bound_to:
        parts.append(f"on {printable(e.bound_to)}")
    if e.reason:
        parts.append(f"— {printable(e.reason)}")
    if voided_by is not None:
        parts.append(f"[did not take effect: see line {voided_by}]")
    return "  ".join(parts)


async def _pages(
    control: Operations, *, task: str | None = None, after: int = 0
) -> AsyncIterator[AuditTrail]:
    """The audit log (one task's lines, with `task`) a page at a time, from line `after` on;
    at least one page, so the chain's verdict comes with it."""
    cursor: int | None = after
    while cursor is not None:
        trail = await control.audit_trail(task=task, after=cursor, limit=PAGE)
        yield trail
        cursor = trail.next


def verify(args: argparse.Namespace) -> int:
    against = _checkpoint(" ".join(args.against)) if args.against else None
    if args.against and against is None:
        print(
            f"t25: error: --against {' '.join(args.against)!r} is not SEQ:HASH "
            "(as `t25 audit checkpoint` prints it)",
            file=sys.stderr,
        )
        return 2

    async def body(control: Operations) -> bool:
        verdict = (await control.audit_trail(limit=0)).verdict  # the verdict, no entries
        where = log_path(control.config.root)
        if not verdict.ok:
            print(f"{_failed(verdict)}: {where}: {verdict.message}", file=sys.stderr)
            return False
        problems = await control.audit_disagreements()
        problems += await _history_problems(control)
        broken = await _against(control, verdict, *against) if against is not None else None
        if problems or broken:  # "ok" is said only of a log that passes every check
            if problems:
                said = f"{verdict.message}, but the store disagrees with it"
                print(f"FAILED: {where}: {said}:", file=sys.stderr)
            for problem in problems:
                print(f"MISMATCH: {problem}", file=sys.stderr)
            if broken:
                print(f"CHECKPOINT: {broken}", file=sys.stderr)
            return False
        print(f"ok: {where}: {verdict.message}")
        if against is not None:
            print(f"ok: checkpoint {against[0]} {against[1]} holds")
        return True

    return 0 if run(args, body) else 1


def _failed(verdict: Verdict) -> str:
    """The word a failing verdict is printed under: TAMPERED, unless it is a log T25 has
    yet to take over (nothing wrong with it)."""
    return "NOT YET VERIFIABLE" if verdict.pending else "TAMPERED"


def _checkpoint(text: str) -> tuple[int, str] | None:
    """`SEQ:HASH` or `SEQ HASH` (as `t25 audit checkpoint` prints it)."""
    found = re.fullmatch(r"\s*(\d+)\s*[: ]\s*([0-9a-f]{64})\s*", text)
    return (int(found[1]), found[2]) if found else None


async def _against(control: Operations, verdict: Verdict, seq: int, digest: str) -> str | None:
    """What is wrong with the chain against a checkpoint kept outside T25, or None."""
    if seq == 0:
        return None if digest == GENESIS else "line 0 is the chain's start, 000…0"
    if verdict.lines < seq:
        return (
            f"the chain ends at line {verdict.lines}, before the checkpoint's line {seq}: "
            "the log and the store were cut back or rewritten"
        )
    found = (await control.audit_trail(after=seq - 1, limit=1)).entries
    if not found or found[0].seq != seq or found[0].hash != digest:
        return (
            f"line {seq} does not have the checkpoint's hash {digest}: the log and the "
            "store were rewritten since it was taken"
        )
    return None


def checkpoint(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> Verdict:
        return (await control.audit_trail(limit=0)).verdict

    verdict = run(args, body)
    if not verdict.ok:
        print(f"{_failed(verdict)}: {verdict.message}; no checkpoint taken", file=sys.stderr)
        return 1
    seq, digest = (verdict.head.seq, verdict.head.hash) if verdict.head else (0, GENESIS)
    if args.json:
        print(json.dumps({"seq": seq, "hash": digest}))
    else:
        print(f"{seq} {digest}")
    return 0


def export(args: argparse.Namespace) -> int:
    since = args.since
    after = since - 1 if isinstance(since, int) and since > 0 else 0
    out = csv.writer(sys.stdout, lineterminator="\n") if args.format == "csv" else None
    if out is not None:
        out.writerow(CSV_COLUMNS)

    async def body(control: Operations) -> Verdict:
        async for trail in _pages(control, after=after):
            for entry in trail.entries:
                if isinstance(since, datetime) and entry.ts < since:
                    continue
                _export(entry, out)
            sys.stdout.flush()
        return trail.verdict

    verdict = run(args, body)
    if not verdict.ok:
        print(f"t25: warning: the chain does not verify: {verdict.message}", file=sys.stderr)
        return 1
    return 0


def _export(entry: AuditEntry, out: Any) -> None:
    """One line: as it was hashed (jsonl), or a csv row (`out`, a csv writer)."""
    if out is None:
        sys.stdout.write(as_line(entry) + "\n")
        return
    row = entry.model_dump()
    row["ts"] = entry.ts.isoformat()
    out.writerow(["" if row[c] is None else row[c] for c in CSV_COLUMNS])


async def _history_problems(control: Operations) -> list[str]:
    """Each task whose row is not what its sealed history leaves it at, or whose history
    holds a state change T25 did not seal (core.control.history)."""
    keys = _keys(control.config)
    out = []
    for task in await _every_task(control):
        events: list[Event] = []
        after = 0
        while found := await control.events(task.id, after=after, limit=PAGE):
            events += [e for e in found if isinstance(e, TaskTransitioned)]
            after = found[-1].id or after
            if len(found) < PAGE:
                break
        history = replay(task.id, events, keys)
        said = [*history.problems, *filter(None, [row_disagreement(task, history)])]
        out += [f"{task.id}: {problem}" for problem in said]
    return out


def _keys(config: Config) -> Keyring:
    return Keyring.open(config.audit.key_file or config.root / KEY_FILE)


async def _every_task(control: Operations) -> list[Task]:
    tasks = [*await control.tasks(), *await control.tasks(archived=True)]
    return list({t.id: t for t in tasks}.values())


def rotate_key(args: argparse.Namespace) -> int:
    from t25_tui.cli.context import config_of

    keys = _keys(config_of(args))
    key = keys.rotate()
    print(
        f"added key {key.id} to {keys.path}: it seals from now on; {len(keys.keys) - 1} older "
        "key(s) kept to verify what they sealed"
    )
    return 0
