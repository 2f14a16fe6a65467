"""Output is bounded: events per run, the log artifact, and T25's memory under a flood."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from core.config.schema import Limits
from core.domain.agent import RunLog
from core.domain.events import Event, RunOutput
from core.domain.models import Lease, utcnow
from core.domain.output import MARKER_PREFIX, truncation_marker
from core.worker.output import OutputBudget, OutputStream
from t25_tui.api.uploads import LogUploads

MiB = 2**20


def test_the_defaults_stream_8_mib_and_keep_64_mib_of_a_run():
    limits = Limits()
    assert limits.max_output_event_bytes == 8 * MiB
    assert limits.max_log_bytes == 64 * MiB


def test_the_marker_is_one_line_that_names_both_bounds():
    marker = truncation_marker(100, 4096)
    assert marker == (
        "\n[t25: output truncated after 100 bytes; the log artifact keeps the first 4096 bytes]\n"
    )
    assert marker.strip().startswith(MARKER_PREFIX)


async def stream_through(writes: list[tuple[str, str]], budget: OutputBudget) -> list[RunOutput]:
    recorded: list[RunOutput] = []

    async def record(event: Event) -> None:
        assert isinstance(event, RunOutput)
        recorded.append(event)

    async with OutputStream(record, "T-1", "R-1", budget) as stream:
        for name, text in writes:
            await stream.write(name, text)
    return recorded


async def test_a_run_streams_up_to_its_budget_then_one_marker_and_nothing_more():
    budget = OutputBudget(100_000, 4096)
    writes = [("stdout", "o" * 30_000), ("stderr", "e" * 30_000)] * 5
    recorded = await stream_through(writes, budget)
    texts = [e.text for e in recorded]
    marker = truncation_marker(100_000, 4096)
    # the write that crossed the budget was stderr's: 90,000 bytes, then 10,000 of it
    assert texts[-1] == marker and recorded[-1].stream == "stderr"
    assert sum(t.count(MARKER_PREFIX) for t in texts) == 1
    assert sum(len(t) for t in texts[:-1]) == 100_000  # exactly the budget, then the marker
    assert "".join(e.text for e in recorded[:-1] if e.stream == "stdout") == "o" * 60_000
    assert "".join(e.text for e in recorded[:-1] if e.stream == "stderr") == "e" * 40_000
    # a later attempt of the same run (an overload retried) streams nothing more
    assert await stream_through([("stdout", "more")], budget) == []


async def test_the_budget_counts_utf8_bytes_and_never_splits_a_character():
    budget = OutputBudget(10, 4096)
    recorded = await stream_through([("stdout", "é" * 20)], budget)
    assert recorded[0].text == "é" * 5  # 10 bytes
    assert recorded[-1].text == truncation_marker(10, 4096)
    budget = OutputBudget(9, 4096)
    assert (await stream_through([("stdout", "é" * 20)], budget))[0].text == "é" * 4


async def upload(uploads: LogUploads, lease: Lease, content: bytes, chunk: int = 1000) -> RunLog:
    offset = 0
    while offset < len(content):
        offset = await uploads.write(lease, offset, content[offset : offset + chunk])
    sent = RunLog(path="/elsewhere", size=len(content), sha256=hashlib.sha256(content).hexdigest())
    return await uploads.take(lease, sent)


async def test_serve_keeps_no_more_of_an_uploaded_log_than_its_own_bound(tmp_path):
    marker = truncation_marker(4096, 4096).encode()
    uploads = LogUploads(tmp_path, 4096)
    for n, (sent, kept) in enumerate(
        [
            (b"x" * 4096, b"x" * 4096),
            (b"x" * 4096 + marker, b"x" * 4096 + marker),  # cut by the worker already
            (b"y" * 10_000, b"y" * 4096 + marker),  # a worker that keeps more
        ]
    ):
        lease = Lease(run_id=f"R-{n + 1}", task_id="T-1", token=1, worker="w", expires_at=utcnow())
        log = await upload(uploads, lease, sent)
        assert log.path.read_bytes() == kept and log.size == len(kept)
        assert log.sha256 == hashlib.sha256(kept).hexdigest()


# -- a 2 x 100 MB flood, through the real `t25 run` ------------------------------------------

FLOOD = 100 * 10**6
EVENTS_CAP = 8 * MiB
# The default: each run's log is spooled to a file and stored a chunk at a time, never held
# whole (bench/output_flood.py measures it, locally and through serve).
LOG_CAP = 64 * MiB
FLOOD_CONFIG = f"""\
projects: [{{name: flood, repo: .}}]
roles:
  spec: [{{adapter: scripted, args: [--misbehave, 'flood:{FLOOD}']}}]
  planner: [{{adapter: scripted}}]
  dev: [{{adapter: scripted}}]
  qa: [{{adapter: scripted}}]
  reviewer: [{{adapter: scripted, model: scripted-2}}]
  docs: [{{adapter: scripted}}]
limits: {{workers: 2, max_output_event_bytes: {EVENTS_CAP}, max_log_bytes: {LOG_CAP}}}
"""


def kib(pid: int, field: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith(field + ":")), 0)


def test_a_2_x_100_mb_flood_stays_within_its_bounds(t25, repo):
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(FLOOD_CONFIG)
    for title in ("Flood one", "Flood two"):
        assert t25("task", "new", title).code == 0
    runner = subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "run"],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    db = repo / ".factory" / "t25.db"
    baseline = peak = 0
    deadline = time.monotonic() + 300
    try:
        while runner.poll() is None and time.monotonic() < deadline:
            peak = max(peak, kib(runner.pid, "VmHWM"))
            if not baseline and _started(db):
                baseline = kib(runner.pid, "VmRSS")  # loaded, its store open: the first run starts
            time.sleep(0.02)
    finally:
        if runner.poll() is None:
            runner.kill()
        _, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err.decode()
    assert baseline, "no run was seen starting"
    assert (peak - baseline) * 1024 <= 100 * 10**6, f"grew {(peak - baseline) / 1024:.0f} MiB"

    with sqlite3.connect(db) as con:
        assert dict(con.execute("SELECT 'T-' || id, state FROM tasks")) == {
            "T-1": "DONE",
            "T-2": "DONE",
        }
        floods = [r for (r,) in con.execute("SELECT id FROM runs WHERE role = 'spec'")]
        assert len(floods) == 2
        marker = truncation_marker(EVENTS_CAP, LOG_CAP)
        log_marker = truncation_marker(LOG_CAP, LOG_CAP).encode()
        for run in floods:
            texts = [
                t
                for (t,) in con.execute(
                    "SELECT json_extract(payload, '$.text') FROM events "
                    "WHERE run_id = ? AND kind = 'run_output' ORDER BY id",
                    (run,),
                )
            ]
            assert texts[-1] == marker  # the stream says where it stopped, last
            assert sum(len(t.encode()) for t in texts[:-1]) <= EVENTS_CAP
            log = _stored_log(con, run)
            assert len(log) == LOG_CAP + len(log_marker) and log.endswith(log_marker)
            assert log.startswith(b'{"type": "system"')  # byte-exact from the start
            shown = t25("logs", f"R-{run}")
            assert shown.code == 0 and marker.strip() in shown.out + shown.err


def _stored_log(con: sqlite3.Connection, run: int) -> bytes:
    """A run's log artifact as the store holds it: in chunks (migration 0011)."""
    (sha,) = con.execute(
        "SELECT sha256 FROM artifacts WHERE run_id = ? AND kind = 'log'", (run,)
    ).fetchone()
    chunks = con.execute("SELECT content FROM blob_chunks WHERE sha256 = ? ORDER BY n", (sha,))
    return b"".join(chunk for (chunk,) in chunks)


def _started(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        with sqlite3.connect(db, timeout=0.1) as con:
            return bool(con.execute("SELECT 1 FROM events WHERE kind = 'run_started'").fetchone())
    except sqlite3.Error:
        return False
