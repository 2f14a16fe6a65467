"""Verifying the audit log reads it a chunk at a time: the memory it takes does not grow with
the file. Measured in a process of its own (its VmHWM), with a wide margin."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.control.audit_lines import GENESIS, encode, seal
from core.domain.models import AuditAnchor
from store import open_store

LINES = 20_000
REASON = "r" * 2000  # lines of some 2 KB: a 44 MB log
GROWTH_MIB = 16  # what verifying may add to the peak of its process: a third of the log

VERIFY = """
import asyncio, json, sys
from pathlib import Path
from core.control.audit import AuditLog
from store import open_store

def peak_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

async def main():
    store = await open_store(f"sqlite:///{sys.argv[2]}")
    try:
        log = AuditLog(Path(sys.argv[1]), store)
        before = peak_kib()
        verdict = await log.verify()
        after = peak_kib()
    finally:
        await store.close()
    print(json.dumps({"ok": verdict.ok, "lines": verdict.lines, "grown_kib": after - before}))

asyncio.run(main())
"""


def write_log(path: Path) -> AuditAnchor:
    start, prev = datetime(2026, 1, 1, tzinfo=UTC), GENESIS
    path.parent.mkdir(parents=True)
    with open(path, "wb") as out:
        for seq in range(1, LINES + 1):
            fields = {"actor": "ana", "task": f"T-{seq}", "decision": "cancel", "reason": REASON}
            line = seal(seq, prev, start + timedelta(seconds=seq), fields)
            out.write(encode(line))
            prev = str(line["hash"])
    return AuditAnchor(seq=LINES, hash=prev)


async def anchor(db: Path, head: AuditAnchor) -> None:
    store = await open_store(f"sqlite:///{db}")
    try:
        await store.set_audit_anchor(head, previous=None)
    finally:
        await store.close()


def test_verifying_a_log_holds_a_chunk_of_it_never_the_whole_file(tmp_path: Path):
    path, db = tmp_path / ".factory" / "audit.jsonl", tmp_path / "t25.db"
    asyncio.run(anchor(db, write_log(path)))
    assert path.stat().st_size > 2 * GROWTH_MIB * 2**20

    done = subprocess.run(
        [sys.executable, "-c", VERIFY, str(path), str(db)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["ok"] and found["lines"] == LINES, found
    assert found["grown_kib"] < GROWTH_MIB * 1024, found
