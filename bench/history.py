"""Reads that scale with what is shown: `t25 task list` and the cockpit's first frame on a
store whose history holds 100, 10,000 and 100,000 finished tasks beside the same 40 still in
the pipeline.

For each history size it prints:

- `t25 task list` (the tasks not finished and a count of the finished ones), `t25 task list
  --all` (every task: what `task list` printed before it counted the finished ones) and
  `t25 --help`, median wall and CPU time of the real binary; target: `task list` ≤ 2×
  `--help`, at every size;
- the board's read, in-process on the same store: what it reads now (the unfinished tasks,
  the newest hundred finished of each kind, their costs: `t25_tui.tui.cards.board_tasks`)
  beside what it read before (every task and every task's cost), median of 5;
- the first frame of the real `t25 tui` in a pseudo-terminal (as over SSH), until the status
  line counts every task; target: flat from 100 to 100,000.

The history is made the way a bench can afford it: one finished task (DONE, merged, with a
run and its cost) through the Store API, then copied in SQL, row for row, to the size asked
(100,000 through the API would take most of an hour); the 40 unfinished tasks are filed after
it through the Store API, spread over the states a task waits or works in. SQLite, the
default store. Each figure is checked: the store holds the tasks it says, `task list` printed
the 40 and the count, `--all` every task, the board read the 40 and the hundred newest, the
first frame counted every task.

Run:  .venv/bin/python bench/history.py [--finished 100,10000,100000] [--runs 9]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checked import happened, sqlite_count
from cli import timed
from tui import frames, load, make_repo

from core.domain.events import TaskTransitioned
from core.domain.models import NewRun, NewTask, RunOutcome, RunStatus, TaskState, Usage
from t25_tui.cli.demo import DEMO_CONFIG
from tests.support.terminal import T25

S = TaskState
T = TypeVar("T")
UNFINISHED = 40
# Where the unfinished tasks wait or work: every state a task is not finished in.
SPREAD = [S.RECEIVED, S.SPEC, S.PLAN, S.AWAITING_APPROVAL, S.IMPLEMENTING, S.QA, S.REVIEW]
SPREAD += [S.NEEDS_INPUT, S.FAILED, S.DONE]  # DONE here: not merged, waiting for its merge


async def fill(repo: Path, finished: int) -> None:
    """`finished` merged tasks (one through the Store API, the rest copied in SQL), then
    UNFINISHED tasks through the Store API."""
    from core.config.schema import load_config
    from core.control.service import ControlPlane
    from store import open_store

    config = load_config(repo / "t25.yaml")
    control = ControlPlane(config, await open_store(config.store_url))
    store = control.store
    try:
        await control.sync_projects()
        template = await _task(store, "Finished change 0", S.DONE, merged=True)
        await _run(store, template)
        _copy(repo / ".factory" / "t25.db", finished - 1)
        for n in range(UNFINISHED):
            task = await _task(store, f"Open change {n}", SPREAD[n % len(SPREAD)], merged=False)
            await _run(store, task)
    finally:
        await store.close()


def history_args(doc: str | None) -> argparse.Namespace:
    """A bench's sizes of history (`--finished`, finished tasks: a comma-separated list) and
    how many times each read is timed (`--repeat`)."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument(
        "--finished", default=[100, 10_000, 100_000], type=lambda v: [int(n) for n in v.split(",")]
    )
    parser.add_argument("--repeat", type=int, default=5)
    return parser.parse_args()


def on_history(finished: int, measure: Callable[[Path], Awaitable[T]]) -> T:
    """`measure` of a fresh repository whose store holds `finished` finished tasks and the
    UNFINISHED ones (`fill`); the repository is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="t25-bench-history-") as tmp:
        repo = make_repo(Path(tmp) / "shop", DEMO_CONFIG)
        asyncio.run(fill(repo, finished))
        return asyncio.run(measure(repo))


async def _task(store, title: str, state: TaskState, *, merged: bool) -> str:
    task, _ = await store.create_task(NewTask(project="shop", title=title), actor="bench")
    if state is not S.RECEIVED:
        moved = TaskTransitioned(
            task_id=task.id, from_state=S.RECEIVED, to_state=state, actor="bench"
        )
        await store.apply_transition(task.id, S.RECEIVED, moved, {"merged": merged})
    return task.id


async def _run(store, task_id: str) -> None:
    await store.enqueue_run(NewRun(task_id=task_id, stage=S.SPEC, role="spec"))
    lease = await store.claim_run("bench", 60)
    outcome = RunOutcome(
        status=RunStatus.SUCCEEDED,
        adapter="scripted",
        model="scripted-1",
        usage=Usage(input_tokens=1000, output_tokens=300),
        cost_usd=0.0075,
    )
    await store.complete_run(lease, outcome)


def _copy(db: Path, copies: int) -> None:
    """Copy task 1 and its run (run 1) `copies` times: copy n is task 1 + n with run 1 + n,
    and a title of its own."""
    import sqlite3

    if copies <= 0:
        return
    renamed = {
        "tasks": {"id": "id + n", "title": "'Finished change ' || n"},
        "runs": {"id": "id + n", "task_id": "task_id + n"},
    }
    with sqlite3.connect(db) as con:
        for table, values in renamed.items():
            columns = [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
            picked = ", ".join(values.get(c, c) for c in columns)
            con.execute(
                "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < ?) "
                f"INSERT INTO {table} ({', '.join(columns)}) "
                f"SELECT {picked} FROM k, (SELECT * FROM {table} WHERE id = 1)",
                (copies,),
            )


def cli_figures(repo: Path, runs: int, total: int) -> dict[str, tuple[float, float]]:
    commands = {
        "t25 --help": [str(T25), "--help"],
        "t25 task list": [str(T25), "task", "list"],
        "t25 task list --all": [str(T25), "task", "list", "--all"],
    }
    import subprocess

    listed = subprocess.run(commands["t25 task list"], cwd=repo, capture_output=True, text=True)
    rows = [line for line in listed.stdout.splitlines() if line.startswith("T-")]
    happened(
        len(rows) == UNFINISHED, f"task list printed {len(rows)} of {UNFINISHED} unfinished tasks"
    )
    finished = total - UNFINISHED
    happened(
        f"and {finished:,} DONE merged" in listed.stdout,
        f"task list did not count the {finished:,} finished: {listed.stdout[-200:]!r}",
    )
    every = subprocess.run(
        commands["t25 task list --all"], cwd=repo, capture_output=True, text=True
    )
    shown = sum(1 for line in every.stdout.splitlines() if line.startswith("T-"))
    happened(shown == total, f"task list --all printed {shown} of {total} tasks")
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():  # round-robin: a busier machine slows each alike
            wall, cpu = timed(argv, repo)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {n: (statistics.median(walls[n]), statistics.median(cpus[n])) for n in commands}


async def board_reads(repo: Path, total: int) -> tuple[float, float, int]:
    """Median seconds of the board's read now and of the read it made before; the cards now."""
    from core.config.schema import load_config
    from core.control.service import ControlPlane
    from store import open_store
    from t25_tui.tui.cards import CARDS_PER_COLUMN, board_tasks

    config = load_config(repo / "t25.yaml")
    control = ControlPlane(config, await open_store(config.store_url))
    try:

        async def now() -> int:
            tasks, unread = await board_tasks(control, everything=False)
            await control.cost_by_task([t.id for t in tasks])
            happened(
                len(tasks) + sum(unread.values()) == total,
                f"the board read {len(tasks)} and counted {sum(unread.values())} of {total}",
            )
            return len(tasks)

        async def before() -> int:
            tasks = await control.tasks()
            await control.cost_by_task()
            happened(len(tasks) == total, f"the old read got {len(tasks)} of {total} tasks")
            return len(tasks)

        took: dict[str, list[float]] = {"now": [], "before": []}
        read = 0
        for _ in range(5):
            for name, how in (("now", now), ("before", before)):
                start = time.perf_counter()
                got = await how()
                took[name].append(time.perf_counter() - start)
                read = got if name == "now" else read
        newest = min(total - UNFINISHED, CARDS_PER_COLUMN)
        happened(
            read == UNFINISHED + newest, f"the board read {read} tasks, not {UNFINISHED + newest}"
        )
        return statistics.median(took["now"]), statistics.median(took["before"]), read
    finally:
        await control.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", default="100,10000,100000")
    parser.add_argument("--runs", type=int, default=9, help="runs of each command")
    args = parser.parse_args()
    sizes = [int(n) for n in args.finished.split(",")]
    print(f"{UNFINISHED} unfinished tasks beside a history of finished ones (SQLite); {load()}")
    rows = []
    for finished in sizes:
        total = finished + UNFINISHED
        with tempfile.TemporaryDirectory(prefix="t25-bench-history-") as tmp:
            repo = make_repo(Path(tmp) / "shop", DEMO_CONFIG)
            start = time.monotonic()
            asyncio.run(fill(repo, finished))
            held = sqlite_count(repo / ".factory" / "t25.db", "SELECT count(*) FROM tasks")
            happened(held == total, f"the store holds {held} of {total} tasks")
            seeded = time.monotonic() - start
            cli = cli_figures(repo, args.runs, total)
            board_now, board_before, read = asyncio.run(board_reads(repo, total))
            times, cpu, rss = frames(repo, total, "--no-workers")
        rows.append((finished, seeded, cli, board_now, board_before, read, times, cpu, rss))
        help_wall = cli["t25 --help"][0]
        print(
            f"\n{finished:,} finished (seeded in {seeded:.1f} s); {load()}\n"
            f"  t25 --help              {cli['t25 --help'][0] * 1000:7.1f} ms wall "
            f"{cli['t25 --help'][1] * 1000:7.1f} ms cpu\n"
            f"  t25 task list           {cli['t25 task list'][0] * 1000:7.1f} ms wall "
            f"{cli['t25 task list'][1] * 1000:7.1f} ms cpu   "
            f"{cli['t25 task list'][0] / help_wall:.2f}× --help (target ≤ 2)\n"
            f"  t25 task list --all     {cli['t25 task list --all'][0] * 1000:7.1f} ms wall "
            f"{cli['t25 task list --all'][1] * 1000:7.1f} ms cpu   "
            f"{cli['t25 task list --all'][0] / help_wall:.2f}× --help (every task, as before)\n"
            f"  the board's read        {board_now * 1000:7.1f} ms ({read} tasks) "
            f"· before: {board_before * 1000:.1f} ms ({finished + UNFINISHED} tasks)\n"
            f"  first frame (t25 tui)   median {statistics.median(times):.2f} s, "
            f"CPU {statistics.median(cpu):.2f} s, RSS {rss:.0f} MB"
        )
    print("\nfinished   task list/--help   board read now / before   first frame (CPU)")
    for finished, _, cli, board_now, board_before, _, times, cpu, _ in rows:
        ratio = cli["t25 task list"][0] / cli["t25 --help"][0]
        print(
            f"{finished:>8,}   {ratio:14.2f}×   {board_now * 1000:8.1f} / {board_before * 1000:8.1f} ms"
            f"   {statistics.median(times):.2f} s ({statistics.median(cpu):.2f} s)"
        )


if __name__ == "__main__":
    main()
