"""Verifying the audit chain at 100, 10,000 and 100,000 lines (a million when asked): the time
and the peak memory of each measurement, beside the check as it was.

For each size (`--lines`), builds N sealed lines (decisions of up to 2,000 tasks by three
actors) in `.factory/audit.jsonl`, anchored in an embedded SQLite store that holds those
tasks and one `DecisionRecorded` for every line, then measures, each in a child process of
its own so that each peak is its own:

- idle: a child that imports what the others do and verifies nothing, the floor of every peak;
- file: `AuditLog.verify` of the log file, read a chunk at a time;
- file, before: the check as it was, for reference: the whole file read and split into a
  list of lines, then walked;
- pydantic, before: the check as it was before that, every line through `AuditEntry`;
- cross-check: what `t25 audit verify` holds the log against, the store's decisions read by
  their index a page at a time beside the log's lines (`core.control.audit_cross`);
- cross-check, before: as it was, every entry loaded as an `AuditEntry` and every event of
  every task read for its decisions;
- store: the same lines in a Postgres database's `audit_chain` (a fresh database, dropped
  afterwards), verified with the file as its mirror; skipped when no Postgres answers.

Each measurement checks that it did the work it times: the chain verified, with as many lines
as were built, a page of GET /audit from the middle held the lines asked for, and the
cross-check found nothing to report; otherwise the script exits non-zero. The time is the
whole of the child's work (its store opened and closed too); the peak is its VmHWM. Figures,
not a test: nothing asserts on time.

Run:
    .venv/bin/python bench/audit_verify.py [--lines 100,10000,100000[,1000000]]
        [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--skip store]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from checked import happened

from core.control.audit import AuditLog, cross_check
from core.control.audit_lines import GENESIS, digest, encode, seal, verify_lines
from core.domain.audit import AuditEntry, ChainLine
from core.domain.events import DecisionRecorded
from core.domain.models import AuditAnchor, NewTask, Project
from store import open_store

if TYPE_CHECKING:
    from core.control.audit_cross import Lines

BATCH = 10_000  # lines inserted into Postgres, or decisions into SQLite, at a time
TASKS = 2000  # the tasks the decisions are spread over
PAGE = 5000  # events per read, as `t25 audit verify` read them
ACTORS = ("ana", "bo", "cy")
DECISIONS = ("approve", "cancel", "archive", "answer")
START = datetime(2026, 1, 1, tzinfo=UTC)


def decision_of(seq: int) -> dict[str, str]:
    """Line `seq`'s decision."""
    return {
        "actor": ACTORS[seq % 3],
        "task": f"T-{seq % TASKS + 1}",
        "decision": DECISIONS[seq % 4],
        "reason": f"decision {seq}: looked at the plan and the diff",
    }


def build(n: int, path: Path) -> AuditAnchor:
    """N sealed lines written to `path`; their head."""
    prev = GENESIS
    with open(path, "wb") as out:
        for seq in range(1, n + 1):
            line = seal(seq, prev, START + timedelta(milliseconds=seq), decision_of(seq))
            out.write(encode(line))
            prev = str(line["hash"])
    return AuditAnchor(seq=n, hash=prev)


async def build_store(db: Path, n: int, head: AuditAnchor) -> None:
    """The SQLite store the log is anchored in: the tasks, and each line's decision."""
    store = await open_store(f"sqlite:///{db}")
    try:
        await store.set_audit_anchor(head, previous=None)
        await store.upsert_project(Project(name="bench", repo_path="/", default_branch="main"))
        for _ in range(min(n + 1, TASKS)):
            await store.create_task(NewTask(project="bench", title="bench"), actor="ana")
    finally:
        await store.close()
    sample = decision_of(1)
    shape = DecisionRecorded(
        task_id=sample["task"], decision=sample["decision"], actor=sample["actor"],
        reason=sample["reason"], at=START,
    )  # fmt: skip
    assert json.loads(_payload(1)) == shape.payload(), "the event's shape changed"
    with sqlite3.connect(db) as con:  # one transaction: the store writes one event per call
        con.executemany(
            "INSERT INTO events (at, kind, task_id, run_id, payload) VALUES (?, ?, ?, NULL, ?)",
            (
                (START.timestamp() + seq / 1000, shape.kind, seq % TASKS + 1, _payload(seq))
                for seq in range(1, n + 1)
            ),
        )


def _payload(seq: int) -> str:
    fields = decision_of(seq)
    del fields["task"]
    return json.dumps({**fields, "bound_to": None}, separators=(",", ":"))


def batches(path: Path) -> Iterator[list[ChainLine]]:
    """The file's lines as the store keeps them, BATCH at a time."""
    batch: list[ChainLine] = []
    with open(path, "rb") as lines:
        for raw in lines:
            text = raw[:-1].decode("ascii")
            fields = json.loads(text)
            at = datetime.fromisoformat(fields["ts"])
            batch.append(ChainLine(fields["seq"], text, fields["hash"], fields["task"], at))
            if len(batch) == BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


# -- the measurements, each run in a child process ------------------------------------------


@dataclass
class Measured:
    ok: bool  # verified what it says, and found nothing wrong
    lines: int  # the lines it went through
    note: str = ""
    page_s: float | None = None  # a page of GET /audit, once the verdict is kept


async def idle(where: Path, n: int, dsn: str) -> Measured:
    return Measured(True, n, "imports only")


async def on_file(where: Path, n: int, dsn: str) -> Measured:
    store = await open_store(f"sqlite:///{where / 't25.db'}")
    try:
        return await verified(AuditLog(where / ".factory" / "audit.jsonl", store), n)
    finally:
        await store.close()


async def verified(audit: AuditLog, n: int) -> Measured:
    """The chain verified once, as GET /audit verifies it and keeps the verdict (an
    `audit.verify()` first would verify it twice: the kept verdict is `trail`'s own), then a
    page of 500 lines from the middle read with the verdict kept: it must hold the lines
    asked for."""
    verdict = (await audit.trail(limit=0)).verdict
    began = time.perf_counter()
    trail = await audit.trail(after=n // 2, limit=500)
    took, wanted = time.perf_counter() - began, min(500, n - n // 2)
    note = f"{verdict.message}; a page held {len(trail.entries)} of {wanted} lines"
    return Measured(verdict.ok and len(trail.entries) == wanted, verdict.lines, note, took)


async def on_file_before(where: Path, n: int, dsn: str) -> Measured:
    """The file's check as it was: read whole, split into a list of lines, walked."""
    store = await open_store(f"sqlite:///{where / 't25.db'}")
    try:
        anchor = await store.get_audit_anchor()
    finally:
        await store.close()
    pieces = (where / ".factory" / "audit.jsonl").read_bytes().split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    lines = [(i, p.decode("utf-8", errors="replace")) for i, p in enumerate(pieces, start=1)]
    verdict = verify_lines(lines, anchor)
    return Measured(verdict.ok, verdict.lines, verdict.message)


async def pydantic_before(where: Path, n: int, dsn: str) -> Measured:
    """The check as it was before that: each line through AuditEntry, then re-hashed."""
    prev, count = GENESIS, 0
    for raw in (where / ".factory" / "audit.jsonl").read_bytes().split(b"\n")[:-1]:
        fields = json.loads(raw)
        entry = AuditEntry.model_validate(fields)
        body = {k: v for k, v in fields.items() if k != "hash"}
        if entry.prev != prev or digest(body) != entry.hash:
            return Measured(False, count, f"line {entry.seq} does not verify")
        prev, count = entry.hash, count + 1
    return Measured(True, count)


async def cross(where: Path, n: int, dsn: str) -> Measured:
    """The cross-check `t25 audit verify` makes now (`ControlPlane.audit_disagreements`)."""
    from core.control.audit_cross import disagreements, file_lines, recorded

    store = await open_store(f"sqlite:///{where / 't25.db'}")
    seen = [0]
    try:
        problems = await disagreements(
            _counted(file_lines(where / ".factory" / "audit.jsonl"), seen), recorded(store)
        )
    finally:
        await store.close()
    return Measured(not problems, seen[0], f"{len(problems)} disagreements")


def _counted(lines: Lines, seen: list[int]) -> Lines:
    async def read() -> AsyncIterator[list[str]]:
        async for page in lines():
            seen[0] += len(page)
            yield page

    return read


async def cross_before(where: Path, n: int, dsn: str) -> Measured:
    """The cross-check as it was: every entry as an AuditEntry; every event of every task."""
    store = await open_store(f"sqlite:///{where / 't25.db'}")
    try:
        entries = await AuditLog(where / ".factory" / "audit.jsonl", store).page()
        found: list[DecisionRecorded] = []
        for task in await store.list_tasks(include_archived=True):
            after = 0
            while events := await store.events_after(after, task_id=task.id, limit=PAGE):
                found += [e for e in events if isinstance(e, DecisionRecorded)]
                after = events[-1].id or after
                if len(events) < PAGE:
                    break
    finally:
        await store.close()
    problems = cross_check(entries, found)
    return Measured(not problems, len(entries), f"{len(problems)} disagreements")


async def on_postgres(where: Path, n: int, dsn: str) -> Measured:
    store = await open_store(dsn)
    try:
        return await verified(AuditLog(where / ".factory" / "audit.jsonl", store), n)
    finally:
        await store.close()


MEASURES = {
    "idle": ("idle (imports only)", idle),
    "file": ("file: AuditLog.verify", on_file),
    "file-before": ("file, before: read whole", on_file_before),
    "pydantic-before": ("file, before that: pydantic", pydantic_before),
    "cross": ("cross-check with the store", cross),
    "cross-before": ("cross-check, before", cross_before),
    "store": ("store: Postgres chain + mirror", on_postgres),
}


def child(name: str, where: Path, n: int, dsn: str) -> None:
    """Run one measurement here and print it as one JSON line."""
    began = time.perf_counter()
    measured = asyncio.run(MEASURES[name][1](where, n, dsn))
    took = time.perf_counter() - began
    print(json.dumps({"s": took, "peak_kib": peak_kib(), **measured.__dict__}))


def peak_kib() -> int:
    """This process's peak resident memory: VmHWM, its own since exec (`ru_maxrss` carries
    over from the parent that forked it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(name: str, where: Path, n: int, dsn: str) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", name, "--dir", str(where), "--lines", str(n)]
    done = subprocess.run([*argv, "--dsn", dsn], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"s": 0.0, "peak_kib": 0, "ok": False, "lines": 0, "note": done.stderr[-300:]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the parent: build, measure, report -------------------------------------------------------


async def with_postgres(dsn: str, path: Path) -> tuple[str, Any] | None:
    """A fresh database holding the file's lines as its chain: its URL and the admin connection
    that drops it; None when no Postgres answers."""
    import asyncpg

    name = f"t25_bench_{uuid.uuid4().hex[:12]}"
    try:
        admin = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"store: skipped, no Postgres at {dsn} ({exc})")
        return None
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    store = await open_store(url)
    try:
        previous = None
        for batch in batches(path):
            await store.append_audit_lines(batch, previous=previous)  # type: ignore[attr-defined]
            previous = AuditAnchor(seq=batch[-1].seq, hash=batch[-1].hash)
    finally:
        await store.close()
    return url, (admin, name)


async def drop(held: Any) -> None:
    admin, name = held
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


def report(n: int, name: str, got: dict[str, Any]) -> bool:
    """Print one figure; whether it did the work it says."""
    right = bool(got["ok"]) and got["lines"] == n
    mark = "" if right else f"  FAILED: {got['lines']:,} of {n:,} lines: {got['note']}"
    page = f"  (a page of GET /audit: {got['page_s']:.2f} s)" if got.get("page_s") else ""
    label = MEASURES[name][0]
    peak = got["peak_kib"] / 1024
    print(f"{n:>9,}  {label:<32} {got['s']:>8.2f} s  {peak:>7.0f} MB{mark}{page}")
    return right


async def size(n: int, dsn: str, skip: set[str]) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        path = where / ".factory" / "audit.jsonl"
        path.parent.mkdir()
        began = time.perf_counter()
        head = build(n, path)
        await build_store(where / "t25.db", n, head)
        mib = path.stat().st_size / 2**20
        print(f"{n:>9,}  lines, {mib:.1f} MiB, built in {time.perf_counter() - began:.1f} s")
        right = True
        for name in ("idle", "file", "file-before", "pydantic-before", "cross", "cross-before"):
            if name not in skip:
                right &= report(n, name, await asyncio.to_thread(measure, name, where, n, dsn))
        if "store" not in skip and (held := await with_postgres(dsn, path)) is not None:
            url, admin = held
            try:
                got = await asyncio.to_thread(measure, "store", where, n, url)
                right &= report(n, "store", got)
            finally:
                await drop(admin)
        return right


async def main(args: argparse.Namespace) -> int:
    print(f"{'lines':>9}  {'measurement':<32} {'time':>10}  {'peak RSS':>10}")
    right = True
    for n in args.lines:
        right &= await size(n, args.dsn, set(args.skip))
    happened(right, "a measurement did not verify every line it says, or found it wrong")
    return 0


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=_sizes, default=[100, 10_000, 100_000])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--skip", action="append", default=[], choices=sorted(MEASURES))
    parser.add_argument("--child", choices=sorted(MEASURES), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.dir, args.lines[0], args.dsn)
        sys.exit(0)
    sys.exit(asyncio.run(main(args)))
