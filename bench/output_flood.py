"""T25's memory and storage under an output flood: two runs at once, each printing 100 MB.

Two tasks whose SPEC agent floods its output (`t25-scripted-agent --misbehave flood:N`,
stdout and stderr alternately, one stdout line of N/2 bytes); the other stages answer at
once. The embedded SQLite store. Two ways:

  * local (the default): one real `t25 run` (a child process, two in-process workers);
  * `--serve`: a real `t25 serve --workers 0` and a real `t25 worker --url` with two slots,
    the worker streaming its output over HTTP and uploading each log in chunks before its
    completion, as a remote worker does.

While it runs, /proc/<pid>/status of each T25 process is sampled; once it has ended, the
store is read.

Prints:
  * T25's resident memory when the first run started (VmRSS, summed over its processes),
    its peak, and the growth. The peak is each process's own peak (VmHWM) summed: an upper
    bound, as the processes need not peak at once; `peak_rss_mib_each` lists them.
  * per flooding run: the bytes of RunOutput text stored, and the size of its log artifact,
  * whether the truncation marker is in the stream and in the artifact, and how the tasks ended.

Run: .venv/bin/python bench/output_flood.py [--serve] [--mb 100] [--runs 2] [--log-mb 64]
[--events-mb 8] (`--log-mb`/`--events-mb` set limits.max_log_bytes/max_output_event_bytes;
0 keeps the defaults). Figures, not a test: tests/integration/test_output_bounds.py asserts on
the budget; but it exits non-zero unless the flood happened: a run was seen starting, every
task ended DONE, `t25 run` exited 0, and each of the `--runs` flooding runs stored output
events and a log.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from checked import happened

ROOT = Path(__file__).resolve().parents[1]
MARKER = "[t25: output truncated after "
CREDENTIAL = "flood-bench-worker-credential"
DONE_STATES = ("DONE", "FAILED", "CANCELLED", "NEEDS_INPUT", "AWAITING_APPROVAL")

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_started(db: Path) -> bool:
    try:
        with sqlite3.connect(db, timeout=0.1) as con:
            return bool(con.execute("SELECT 1 FROM events WHERE kind = 'run_started'").fetchone())
    except sqlite3.Error:
        return False


def all_ended(db: Path, runs: int) -> bool:
    try:
        with sqlite3.connect(db, timeout=0.1) as con:
            states = [s for (s,) in con.execute("SELECT state FROM tasks")]
    except sqlite3.Error:
        return False
    return len(states) == runs and all(s in DONE_STATES for s in states)


def start(repo: Path, serve: bool) -> list[subprocess.Popen[str]]:
    """`t25 run`; or `t25 serve` and, once it answers, `t25 worker --url` with two slots."""
    spawn = functools.partial(
        subprocess.Popen,
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FACTORY_WORKER_CREDENTIAL": CREDENTIAL},
    )
    if not serve:
        return [spawn([sys.executable, "-m", "t25_tui", "run"])]
    url = f"http://127.0.0.1:{free_port()}"
    server = spawn([sys.executable, "-m", "t25_tui", "serve", "--bind", url[7:], "--workers", "0"])
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as answer:
                if answer.status == 200:
                    break
        except OSError:
            time.sleep(0.1)
    worker = spawn([sys.executable, "-m", "t25_tui", "worker", "--url", url, "--workers", "2"])
    return [server, worker]


def flood(
    repo: Path, *, mb: int, runs: int, log_mb: int, events_mb: int, serve: bool
) -> dict[str, object]:
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
    db_path = repo / ".factory" / "t25.db"
    procs = start(repo, serve)
    errors = [""] * len(procs)

    def drain(i: int) -> None:  # a full stderr pipe would stop the process
        stream = procs[i].stderr
        assert stream is not None
        errors[i] = stream.read()

    readers = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(len(procs))]
    for reader in readers:
        reader.start()
    baselines: list[int] = []
    peaks = [0] * len(procs)
    began = time.monotonic()
    while procs[0].poll() is None:
        peaks = [
            max(p, status_kib(proc.pid, "VmHWM") or 0) for p, proc in zip(peaks, procs, strict=True)
        ]
        if not baselines and run_started(db_path):  # loaded, the store open: the first run starts
            baselines = [status_kib(proc.pid, "VmRSS") or 0 for proc in procs]
        if serve and all_ended(db_path, runs):
            for proc in reversed(procs):  # the worker first, then serve
                proc.terminate()
                proc.wait(timeout=60)
        time.sleep(0.05)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=60)
    for reader in readers:
        reader.join(timeout=10)
    seconds = time.monotonic() - began
    baseline = sum(baselines)
    db = sqlite3.connect(db_path)
    stored = {}
    for run_id, role, count, text in db.execute(
        "SELECT runs.id, runs.role, count(events.id), "
        "coalesce(sum(length(CAST(json_extract(events.payload, '$.text') AS BLOB))), 0) "
        "FROM runs LEFT JOIN events ON events.run_id = runs.id AND events.kind = 'run_output' "
        "GROUP BY runs.id ORDER BY runs.id"
    ):
        if role != "spec":
            continue
        (sha, size) = db.execute(
            "SELECT sha256, blobs.size FROM artifacts JOIN blobs USING (sha256) "
            "WHERE artifacts.run_id = ? AND artifacts.kind = 'log'",
            (run_id,),
        ).fetchone() or (None, None)
        (marked,) = db.execute(
            "SELECT count(*) FROM events WHERE run_id = ? AND kind = 'run_output' "
            "AND instr(json_extract(payload, '$.text'), ?) > 0",
            (run_id, MARKER),
        ).fetchone()
        # The log's last bytes: its last chunk (blob_chunks), or the blob itself.
        (tail,) = db.execute(
            "SELECT coalesce((SELECT content FROM blob_chunks WHERE sha256 = ?1 "
            "ORDER BY n DESC LIMIT 1), (SELECT content FROM blobs WHERE sha256 = ?1))",
            (sha,),
        ).fetchone()
        stored[f"R-{run_id}"] = {
            "output_events": count,
            "output_event_bytes": text,
            "log_artifact_bytes": size,
            "marker_in_stream": bool(marked),
            "marker_in_log": tail is not None and MARKER.encode() in bytes(tail)[-200:],
        }
    states = dict(db.execute("SELECT 'T-' || id, state FROM tasks").fetchall())
    flooded = [r for r in stored.values() if r["output_events"] and r["log_artifact_bytes"]]
    happened(
        bool(baselines)
        and list(states.values()) == ["DONE"] * runs
        and len(flooded) == len(stored) == runs
        and (serve or procs[0].returncode == 0),
        f"tasks ended {states}, {len(flooded)} of {runs} flooding runs stored output and a log, "
        f"a run seen starting: {bool(baselines)}, exit codes {[p.returncode for p in procs]}: "
        f"{[line for err in errors for line in err.strip().splitlines()[-2:]]}",
    )
    leftovers = [p.name for d in ("run-logs", "uploads") for p in (repo / ".factory" / d).glob("*")]
    return {
        "through": "t25 serve + t25 worker --url" if serve else "t25 run",
        "exit_codes": [proc.returncode for proc in procs],
        "seconds": round(seconds, 1),
        "rss_at_first_run_mib": round(baseline / 1024, 1),
        "rss_at_first_run_mib_each": [round(b / 1024, 1) for b in baselines],
        "peak_rss_mib": round(sum(peaks) / 1024, 1),
        "peak_rss_mib_each": [round(p / 1024, 1) for p in peaks],
        "growth_mib": round((sum(peaks) - baseline) / 1024, 1),
        "growth_mb": round((sum(peaks) - baseline) * 1024 / 10**6, 1),
        "flooding_runs": stored,
        "tasks": states,
        "log_files_left": leftovers,
        "stderr_tail": [line for err in errors for line in err.strip().splitlines()[-3:]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="output of each flooding run (MB)")
    parser.add_argument("--runs", type=int, default=2, help="flooding runs at once")
    parser.add_argument("--log-mb", type=int, default=0, help="limits.max_log_bytes in MiB")
    parser.add_argument(
        "--events-mb", type=int, default=0, help="limits.max_output_event_bytes in MiB"
    )
    parser.add_argument(
        "--serve", action="store_true", help="through t25 serve and a remote t25 worker"
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
            serve=args.serve,
        )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
