"""Verifying the audit chain: a million lines, from the log file and from the store.

Builds N sealed lines (default 1,000,000; decisions of 2,000 tasks by three actors), then
times `AuditLog.verify` on them:

- the file: `.factory/audit.jsonl` anchored in an embedded SQLite store;
- the store: the same lines in a Postgres database's `audit_chain` (a fresh database,
  dropped afterwards), with the file as its mirror, so the mirror's comparison is
  included; skipped when no Postgres answers at `--dsn`;
- for reference, the check as it was before: every line through `AuditEntry` (pydantic),
  on the same lines held in memory.

Run:
    .venv/bin/python bench/audit_verify.py [--lines 1000000]
        [--dsn postgresql://postgres@127.0.0.1:5432/postgres]

Figures, not a test: nothing asserts on time. The goal is under a minute for a million lines.
It exits non-zero unless each verification found the chain whole and N lines long, and each
page held the lines asked for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from checked import happened

from core.control.audit import AuditLog
from core.control.audit_lines import GENESIS, digest, encode, seal
from core.domain.audit import AuditEntry, ChainLine, Verdict
from core.domain.models import AuditAnchor
from store import open_store

BATCH = 10_000  # lines inserted into Postgres at a time


def build(n: int, path: Path) -> AuditAnchor:
    """N sealed lines written to `path`; their head."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    prev = GENESIS
    with open(path, "wb") as out:
        for seq in range(1, n + 1):
            fields = {
                "actor": ("ana", "bo", "cy")[seq % 3],
                "task": f"T-{seq % 2000 + 1}",
                "decision": ("approve", "cancel", "archive", "answer")[seq % 4],
                "reason": f"decision {seq}: looked at the plan and the diff",
            }
            line = seal(seq, prev, start + timedelta(milliseconds=seq), fields)
            out.write(encode(line))
            prev = str(line["hash"])
    return AuditAnchor(seq=n, hash=prev)


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


def pydantic_loop(path: Path) -> float:
    """The check as it was: each line through AuditEntry, then re-hashed."""
    began = time.perf_counter()
    prev = GENESIS
    for raw in path.read_bytes().split(b"\n")[:-1]:
        fields = json.loads(raw)
        entry = AuditEntry.model_validate(fields)
        body = {k: v for k, v in fields.items() if k != "hash"}
        if entry.prev != prev or digest(body) != entry.hash:
            raise SystemExit(f"line {entry.seq} does not verify")
        prev = entry.hash
    return time.perf_counter() - began


async def on_file(path: Path, head: AuditAnchor, tmp: Path) -> tuple[float, str]:
    store = await open_store(f"sqlite:///{tmp / 't25.db'}")
    try:
        await store.set_audit_anchor(head, previous=None)
        audit = AuditLog(path, store)
        began = time.perf_counter()
        verdict = await audit.verify()
        took = time.perf_counter() - began
        whole(verdict, head.seq, "file")
        print(f"file:  verified in {took:.1f} s ({verdict.message})")
        print(f"file:  a page of GET /audit: {await page(audit, head.seq):.2f} s")
        return took, verdict.message
    finally:
        await store.close()


def whole(verdict: Verdict, lines: int, where: str) -> None:
    """Exit unless the verification found all `lines` lines and the chain whole."""
    happened(
        verdict.ok and verdict.lines == lines,
        f"{where}: verified {verdict.lines} of {lines} lines, ok {verdict.ok}: {verdict.message}",
    )


async def page(audit: AuditLog, lines: int) -> float:
    """A page of 500 lines from the middle, as GET /audit reads it once the verdict of the
    first page is kept."""
    await audit.trail(limit=0)
    began = time.perf_counter()
    trail = await audit.trail(after=lines // 2, limit=500)
    wanted = min(500, lines - lines // 2)
    happened(len(trail.entries) == wanted, f"a page held {len(trail.entries)} of {wanted} lines")
    return time.perf_counter() - began


async def on_postgres(dsn: str, path: Path, lines: int) -> tuple[float, float, str] | None:
    import asyncpg

    name = f"t25_bench_{uuid.uuid4().hex[:12]}"
    url = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    try:
        admin = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"store: skipped, no Postgres at {dsn} ({exc})")
        return None
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        store = await open_store(url)
        try:
            began = time.perf_counter()
            previous = None
            for batch in batches(path):
                await store.append_audit_lines(batch, previous=previous)  # type: ignore[attr-defined]
                previous = AuditAnchor(seq=batch[-1].seq, hash=batch[-1].hash)
            loaded = time.perf_counter() - began
            audit = AuditLog(path, store)
            began = time.perf_counter()
            verdict = await audit.verify()
            took = time.perf_counter() - began
            whole(verdict, lines, "store")
            paged = await page(audit, lines)
            print(f"store: loaded in {loaded:.1f} s; verified in {took:.1f} s ({verdict.message})")
            print(f"store: a page of GET /audit: {paged:.2f} s")
            return loaded, took, verdict.message
        finally:
            await store.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        tmp = Path(where)
        path = tmp / ".factory" / "audit.jsonl"
        path.parent.mkdir()
        began = time.perf_counter()
        head = build(args.lines, path)
        size = path.stat().st_size / 2**20
        print(f"{args.lines:,} lines, {size:.0f} MiB, built in {time.perf_counter() - began:.1f} s")
        await on_file(path, head, tmp)
        await on_postgres(args.dsn, path, args.lines)
        print(f"before (pydantic per line), the file: {pydantic_loop(path):.1f} s")


if __name__ == "__main__":
    asyncio.run(main())
