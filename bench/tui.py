"""Cockpit figures: first frame with many tasks, keypress-to-repaint under streaming agents,
10 MB through a log pane, a 5,000-line diff opened, and resident memory in each case.

    .venv/bin/python bench/tui.py [--tasks 5000] [--streams 8] [--presses 40] [--log-mb 10]
                                  [--diff-lines 5000]

The first two run the real `t25 tui` binary in a pseudo-terminal (as over SSH) and time
what it draws (the first frame also attached to a `t25 serve`, with `--url`); the third drives the app in-process with Pilot. Targets (issue 15): first
frame with 5,000 tasks ≤ 1.0 s on a quiet machine, keypress p95 ≤ 100 ms with 8 runs
streaming, the UI never freezes on 10 MB of output; the fourth opens the diff screen on a
task whose branch changes 5,000 lines, read from git as the cockpit reads it: target
≤ 0.3 s to the drawn screen.

Each part checks that what it times happened, and exits non-zero otherwise: the board showed
all N tasks, every agent streamed while the keys were pressed, the log pane wrote every byte
recorded, the diff screen drew every line of the change.

On a shared machine wall-clock figures move with the load: the first frame is also given
as the CPU time the `t25 tui` process had spent when it appeared, which moves far less,
and every part prints the load average it ran at.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checked import happened

from core.domain.events import RunOutput, TaskTransitioned
from core.domain.models import NewRun, RunOutcome, RunStatus, TaskState, Usage
from t25_tui.api.credentials import LOCAL_TOKEN
from t25_tui.cli.demo import DEMO_CONFIG
from t25_tui.tui.sample_data import make_sample_repo
from tests.support.terminal import T25, Terminal


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def make_repo(where: Path, config: str) -> Path:
    where.mkdir(parents=True)
    make_sample_repo(where)
    (where / ".git" / "info" / "exclude").write_text("/.factory/\n/t25.yaml\n")
    (where / "t25.yaml").write_text(config.replace("PYTHON", sys.executable))
    (where / ".factory").mkdir()
    return where


# -- 1. time to first frame with N tasks ----------------------------------------------------


async def fill(repo: Path, n: int) -> None:
    """N tasks spread over every state, one finished run each, through the Store API.
    (States are set with store.apply_transition directly: a bench needs the spread, not
    the walk through every stage.)"""
    from core.config.schema import load_config
    from core.control.service import ControlPlane
    from store import open_store

    config = load_config(repo / "t25.yaml")
    f = ControlPlane(config, await open_store(config.store_url))
    await f.sync_projects()
    from core.domain.models import NewTask

    states = list(TaskState)
    for i in range(n):
        task, _ = await f.store.create_task(
            NewTask(project="shop", title=f"Task number {i}"), actor="bench"
        )
        await f.store.enqueue_run(NewRun(task_id=task.id, stage=TaskState.SPEC, role="spec"))
        lease = await f.store.claim_run("bench", 60)
        await f.store.complete_run(
            lease,
            RunOutcome(
                status=RunStatus.SUCCEEDED,
                adapter="scripted",
                model="scripted-1",
                usage=Usage(input_tokens=1000, output_tokens=300),
                cost_usd=0.0075,
            ),
        )
        target = states[i % len(states)]
        if target is not TaskState.RECEIVED:
            await f.store.apply_transition(
                task.id,
                task.state,
                TaskTransitioned(
                    task_id=task.id, from_state=task.state, to_state=target, actor="bench"
                ),
                {},
            )
    await f.store.close()


def first_frame(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / "shop", DEMO_CONFIG)
        t0 = time.monotonic()
        asyncio.run(fill(repo, n))
        print(f"  seeded {n} tasks in {time.monotonic() - t0:.1f}s")
        times, cpu, rss = frames(repo, n, "--no-workers")
        print(
            f"time to first frame with {n} tasks (real t25 tui in a pty, 120x36): "
            f"best {min(times):.2f}s, median {statistics.median(times):.2f}s "
            f"(target ≤ 1.0 s), CPU {statistics.median(cpu):.2f}s; RSS {rss:.0f} MB; {load()}"
        )
        url = f"127.0.0.1:{free_port()}"
        serve = subprocess.Popen(
            [str(T25), "serve", "--bind", url, "--workers", "0"],
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_listening(url)
            token = ["--token-file", str(repo / LOCAL_TOKEN)]  # the one serve made and knows
            times, cpu, rss = frames(Path(tmp), n, "--url", f"http://{url}", *token)
        finally:
            serve.terminate()
            serve.wait()
        print(
            f"  attached to a local t25 serve (t25 tui --url, REST + SSE): "
            f"best {min(times):.2f}s, median {statistics.median(times):.2f}s, "
            f"CPU {statistics.median(cpu):.2f}s; RSS {rss:.0f} MB"
        )


def frames(cwd: Path, n: int, *args: str) -> tuple[list[float], list[float], float]:
    """Three starts of the real binary: seconds until the board shows all `n` tasks, the
    CPU seconds the process had used by then, and RSS."""
    times, cpu, rss = [], [], 0.0
    for _ in range(3):
        started = time.monotonic()
        term = Terminal(cwd, *args, size=(120, 36))
        try:
            term.wait_for(f"{n} tasks", timeout=60)
            times.append(time.monotonic() - started)
            cpu.append(cpu_s(term.pid))
            rss = rss_mb(term.pid)
            term.type("q")
            term.wait_exit()
        finally:
            term.kill()
    return times, cpu, rss


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    """The machine's load average (1, 5 and 15 minutes): what the figures ran beside."""
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def wait_listening(bind: str, timeout_s: float = 30.0) -> None:
    host, _, port = bind.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- 2. keypress to repaint while agents stream -----------------------------------------------

STREAMER = """#!{python}
# Streams lines for a while, then behaves as the real scripted agent.
import os, sys, time
if "--version" in sys.argv:
    os.execv({real!r}, [{real!r}, *sys.argv[1:]])
end = time.monotonic() + {seconds}
i = 0
while time.monotonic() < end:
    sys.stdout.write('{{"type": "assistant", "text": "streaming line %d %s"}}\\n' % (i, "z" * 80))
    i += 1
    if i % 20 == 0:
        sys.stdout.flush()
        time.sleep({pause})
sys.stdout.flush()
os.execv({real!r}, [{real!r}, *sys.argv[1:]])
"""


def keypress(streams: int, presses: int, lines_per_s: int) -> None:
    real = shutil.which("t25-scripted-agent", path=str(Path(sys.executable).parent))
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp) / "bin"
        bin_dir.mkdir()
        fake = bin_dir / "t25-scripted-agent"
        fake.write_text(
            STREAMER.format(
                python=sys.executable, seconds=presses * 0.6 + 20, real=real, pause=20 / lines_per_s
            )
        )
        fake.chmod(0o755)
        config = DEMO_CONFIG.replace("workers: 2", f"workers: {streams}")
        repo = make_repo(Path(tmp) / "shop", config)
        t25 = Path(sys.executable).with_name("t25")
        import subprocess

        for i in range(streams):
            subprocess.run(
                [str(t25), "task", "new", f"Stream {i}"],
                cwd=repo,
                check=True,
                stdout=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
            )
        os.environ["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
        term = Terminal(repo, size=(120, 36))
        try:
            term.wait_for(f"WORKING {streams}", timeout=60)
            time.sleep(3)  # let every agent get going
            lags = []
            for n in range(presses):
                term.raw = b""
                sent = time.monotonic()
                os.write(term.fd, b"?")
                try:
                    term.wait_for("Keys by where they work", timeout=10)
                except AssertionError:
                    raise SystemExit(f"press {n}: the help screen never appeared") from None
                lags.append((time.monotonic() - sent) * 1000)
                os.write(term.fd, b"\x1b")
                time.sleep(0.25)
                term.read(0.05)
            moves = []  # a light repaint: the filter bar opens (escape closes it again)
            for _ in range(presses):
                term.read(0.05)
                term.raw = b""
                sent = time.monotonic()
                os.write(term.fd, b"/")
                term.wait_for("escape clears", timeout=10)
                moves.append((time.monotonic() - sent) * 1000)
                os.write(term.fd, b"\x1b")
                time.sleep(0.25)
            rss = rss_mb(term.pid)
            events, streamed = _count_output(repo)
            term.type("q")
            term.wait_exit(60)
        finally:
            term.kill()
    if streamed < streams:
        raise SystemExit(
            f"only {streamed} of {streams} runs streamed output ({events} batches): the presses "
            "were timed on a cockpit that was not under load; see the runs' errors in `t25 logs`"
        )
    print(
        f"keypress to repaint with {streams} runs streaming about {lines_per_s} lines/s each "
        f"({events} output batches recorded; target p95 ≤ 100 ms); RSS {rss:.0f} MB; {load()}"
    )
    for what, times in (("open the help screen (?)", lags), ("open the filter bar (/)", moves)):
        times.sort()
        p95 = times[max(0, int(len(times) * 0.95) - 1)]
        print(
            f"  {what}: p50 {statistics.median(times):.0f} ms, p95 {p95:.0f} ms, "
            f"max {times[-1]:.0f} ms"
        )


def _count_output(repo: Path) -> tuple[int, int]:
    """The output batches recorded, and how many runs wrote the streamer's lines."""
    import sqlite3

    with sqlite3.connect(repo / ".factory" / "t25.db") as db:
        batches, runs = db.execute(
            "SELECT count(*), count(DISTINCT run_id) FROM events WHERE kind = 'run_output'"
            " AND payload LIKE '%streaming line%'"
        ).fetchone()
    return batches, runs


# -- 3. 10 MB through a log pane ----------------------------------------------------------------


async def log_flood(megabytes: int) -> None:
    from t25_tui.runtime import open_sample
    from t25_tui.tui.app import make_app
    from t25_tui.tui.screens.detail import TaskDetailScreen
    from t25_tui.tui.widgets.logpane import LogPane

    with tempfile.TemporaryDirectory() as tmp:
        s = await open_sample(Path(tmp) / "shop")
        f = s.control
        run = [r for r in await f.store.list_runs(task_id="T-3") if r.status is RunStatus.RUNNING][
            -1
        ]
        app = make_app(f, clock=s.clock)
        async with app.run_test(size=(120, 36)) as pilot:
            await app.loaded.wait()
            app.board.focus_task("T-3")
            await pilot.press("w")  # its log (on the board, l moves between lanes)
            opened = time.monotonic()
            while not (
                isinstance(app.screen, TaskDetailScreen) and app.screen.query_one(LogPane).replayed
            ):
                happened(time.monotonic() - opened < 120, "T-3's log pane did not open in 120 s")
                await pilot.pause(0.02)
            pane = app.screen.query_one(LogPane)
            before = pane.written
            line = "agent: " + "w" * 92 + "\n"  # 100 bytes a line
            chunk = line * 320  # 32 KB, the worker's batch size
            total = megabytes * 1024 * 1024
            lag = {"max": 0.0}
            stop = asyncio.Event()

            async def watch_loop() -> None:  # how late the UI loop wakes: a freeze shows here
                while not stop.is_set():
                    t = time.monotonic()
                    await asyncio.sleep(0.01)
                    lag["max"] = max(lag["max"], time.monotonic() - t - 0.01)

            watcher = asyncio.create_task(watch_loop())
            started = time.monotonic()
            sent = 0
            while sent < total:
                await f.record(RunOutput(task_id="T-3", run_id=run.id, stream="stdout", text=chunk))
                sent += len(chunk)
            recorded = time.monotonic() - started
            while pane.written - before < sent:
                happened(
                    time.monotonic() - started < 600,
                    f"the log pane wrote {pane.written - before} of {sent} bytes in 600 s",
                )
                await pilot.pause(0.02)
            await pilot.pause()
            shown = time.monotonic() - started
            stop.set()
            await watcher
            lines = len(pane.output.lines)
            rss = rss_mb()
        await s.close()
    print(
        f"{megabytes} MB through a log pane: recorded in {recorded:.2f}s, on screen after "
        f"{shown:.2f}s; longest UI-loop stall {lag['max'] * 1000:.0f} ms; "
        f"{lines} lines kept (max_lines bound); RSS {rss:.0f} MB"
    )


# -- 4. the diff screen on a long diff ---------------------------------------------------------


async def diff_open(lines: int, repeats: int = 5) -> None:
    from t25_tui.runtime import open_sample
    from t25_tui.tui.app import make_app
    from t25_tui.tui.screens.diff import DiffScreen, DiffView, diff_screen

    with tempfile.TemporaryDirectory() as tmp:
        s = await open_sample(Path(tmp) / "shop")
        f = s.control
        task = await f.task("T-1")
        worktrees = f.worktrees(task.project)
        path = await worktrees.ensure(task)
        per_file = 500  # the change: files of 500 new lines each, `lines` diff lines in all
        files = -(-lines // (per_file + 6))  # each file's diff: 6 header lines and its own
        for n in range(files):
            body = "".join(f"def f_{n}_{i}(x):  # line {i}\n" for i in range(per_file))
            (path / f"long_{n}.py").write_text(body)
        await worktrees.history.commit_all(task, f"{task.id}: a long change")
        app = make_app(f, clock=s.clock)
        took: list[float] = []
        async with app.run_test(size=(160, 48)) as pilot:
            await app.loaded.wait()
            for _ in range(repeats):
                started = time.monotonic()
                app.push_screen(await diff_screen(f, "T-1", s.clock))  # what `d` does
                while not (isinstance(app.screen, DiffScreen) and app.screen.ready):
                    await pilot.pause(0.005)
                await pilot.pause()  # drawn
                took.append(time.monotonic() - started)
                shown = len(app.screen.query_one(DiffView).lines)
                happened(shown >= lines, f"the diff screen drew {shown} of {lines} diff lines")
                app.pop_screen()
                await pilot.pause()
        await s.close()
    print(
        f"diff screen, {shown} diff lines in {files} files read from git: opened and drawn in "
        f"median {statistics.median(took) * 1000:.0f} ms, worst {max(took) * 1000:.0f} ms "
        f"of {repeats} (target ≤ 300 ms); {load()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument(
        "--lines-per-s",
        type=int,
        default=200,
        help="each streaming agent's output rate (100-byte lines)",
    )
    parser.add_argument("--log-mb", type=int, default=10)
    parser.add_argument("--diff-lines", type=int, default=5000)
    parser.add_argument("--only", choices=["frame", "keys", "log", "diff"])
    args = parser.parse_args()
    if args.only in (None, "frame"):
        first_frame(args.tasks)
    if args.only in (None, "keys"):
        keypress(args.streams, args.presses, args.lines_per_s)
    if args.only in (None, "log"):
        asyncio.run(log_flood(args.log_mb))
    if args.only in (None, "diff"):
        asyncio.run(diff_open(args.diff_lines))


if __name__ == "__main__":
    main()
