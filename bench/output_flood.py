"""T25's memory and storage under an output flood: two runs at once, each printing 100 MB.

A real `t25 run` (a child process, the embedded SQLite store, two workers) works two tasks
whose SPEC agent floods its output (`t25-scripted-agent --misbehave flood:N`, stdout and
stderr alternately, one stdout line of N/2 bytes); the other stages answer at once. While it
runs, /proc/<pid>/status is sampled; once it has ended, the store is read.

Prints:
  * T25's resident memory when the first run started, its peak (VmHWM), and the growth,
  * per flooding run: the bytes of RunOutput text stored, and the size of its log artifact,
  * whether the truncation marker is in the stream and in the artifact, and how the tasks ended.

Run: .venv/bin/python bench/output_flood.py [--mb 100] [--runs 2] [--log-mb 64] [--events-mb 8]
(`--log-mb`/`--events-mb` set limits.max_log_bytes/max_output_event_bytes; 0 keeps the
defaults). Figures, not a test: tests/test_output_bounds.py asserts on the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "[t25: output truncated after "

CONFIG = """\
projects: [{{name: flood, repo: .}}]
roles:
  spec: [{{adapter: scripted, args: [--misbehave, 'flood:{flood}']}}]
  planner: [{{adapter: scripted}}]
  dev: [{{adapter: scripted}}]
  qa: [{{adapter: scripted}}]
  reviewer: [{{adapter: scripted, model: scripted-2}}]
  docs: [{{adapter: scripted}}]
limits:
  workers: {runs}
{limits}"""


def t25(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t25_tui", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def make_repo(where: Path) -> Path:
    where.mkdir()
    for argv in (
        ["git", "init", "-q", "-b", "trunk"],
        ["git", "config", "user.email", "bench@t25.invalid"],
        ["git", "config", "user.name", "bench"],
    ):
        subprocess.run(argv, cwd=where, check=True)
    (where / "README.md").write_text("flood\n")
    subprocess.run(["git", "add", "-A"], cwd=where, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "init"], cwd=where, check=True)
    return where


def status_kib(pid: int, field: str) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def flood(repo: Path, *, mb: int, runs: int, log_mb: int, events_mb: int) -> dict[str, object]:
    """Run the flood in `repo`; what it cost and what was stored."""
    assert t25("init", cwd=repo).returncode == 0
    limits = "".join(
        f"  {key}: {value * 2**20}\n"
        for key, value in (("max_log_bytes", log_mb), ("max_output_event_bytes", events_mb))
        if value
    )
    (repo / "t25.yaml").write_text(CONFIG.format(flood=mb * 10**6, runs=runs, limits=limits))
    for n in range(runs):
        assert t25("task", "new", f"Flood {n + 1}", cwd=repo).returncode == 0
    runner = subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "run"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started: list[int] = []
    lines: list[str] = []

    def read() -> None:
        assert runner.stdout is not None
        for line in runner.stdout:
            lines.append(line)
            if not started and " started: " in line:
                started.append(status_kib(runner.pid, "VmRSS") or 0)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    peak = 0
    began = time.monotonic()
    while runner.poll() is None:
        peak = max(peak, status_kib(runner.pid, "VmHWM") or 0)
        time.sleep(0.05)
    reader.join(timeout=10)
    seconds = time.monotonic() - began
    err = runner.stderr.read() if runner.stderr else ""
    db = sqlite3.connect(repo / ".factory" / "t25.db")
    stored = {}
    for run_id, role, count, text in db.execute(
        "SELECT runs.id, runs.role, count(events.id), "
        "coalesce(sum(length(CAST(json_extract(events.payload, '$.text') AS BLOB))), 0) "
        "FROM runs LEFT JOIN events ON events.run_id = runs.id AND events.kind = 'run_output' "
        "GROUP BY runs.id ORDER BY runs.id"
    ):
        if role != "spec":
            continue
        (size,) = db.execute(
            "SELECT blobs.size FROM artifacts JOIN blobs USING (sha256) "
            "WHERE artifacts.run_id = ? AND artifacts.kind = 'log'",
            (run_id,),
        ).fetchone() or (None,)
        (marked,) = db.execute(
            "SELECT count(*) FROM events WHERE run_id = ? AND kind = 'run_output' "
            "AND instr(json_extract(payload, '$.text'), ?) > 0",
            (run_id, MARKER),
        ).fetchone()
        (in_log,) = db.execute(
            "SELECT count(*) FROM artifacts JOIN blobs USING (sha256) "
            "WHERE artifacts.run_id = ? AND artifacts.kind = 'log' "
            "AND instr(CAST(blobs.content AS TEXT), ?) > 0",
            (run_id, MARKER),
        ).fetchone()
        stored[f"R-{run_id}"] = {
            "output_events": count,
            "output_event_bytes": text,
            "log_artifact_bytes": size,
            "marker_in_stream": bool(marked),
            "marker_in_log": bool(in_log),
        }
    states = dict(db.execute("SELECT 'T-' || id, state FROM tasks").fetchall())
    return {
        "exit_code": runner.returncode,
        "seconds": round(seconds, 1),
        "rss_at_first_run_mib": round((started[0] if started else 0) / 1024, 1),
        "peak_rss_mib": round(peak / 1024, 1),
        "growth_mib": round((peak - (started[0] if started else 0)) / 1024, 1),
        "flooding_runs": stored,
        "tasks": states,
        "stderr_tail": err.strip().splitlines()[-3:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="output of each flooding run (MB)")
    parser.add_argument("--runs", type=int, default=2, help="flooding runs at once")
    parser.add_argument("--log-mb", type=int, default=0, help="limits.max_log_bytes in MiB")
    parser.add_argument(
        "--events-mb", type=int, default=0, help="limits.max_output_event_bytes in MiB"
    )
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    with tempfile.TemporaryDirectory(prefix="t25-flood-") as tmp:
        figures = flood(
            make_repo(Path(tmp) / "repo"),
            mb=args.mb,
            runs=args.runs,
            log_mb=args.log_mb,
            events_mb=args.events_mb,
        )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
