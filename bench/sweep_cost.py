"""What one sweeper pass costs at a queue's length: the pass `t25 run`, `t25 serve` and the
cockpit make every half second, with 100, 5,000 and 20,000 runs queued.

A pass finds the tasks that can move: those with nothing queued or running. For each queue
length (`--queued`) a fresh store is filled with that many tasks in IMPLEMENTING, each with
its run queued (bench/leases.py's `fill_t25`), then one sweeper pass and its `idle` check are
timed, `--repeat` times, beside, in the same run, the reference: reading the queue the way a
pass used to find those tasks (every queued and running run, and every working task, as
models). The pass reads an index entry per working task and builds no model of them: tens
of milliseconds at 20,000; the reference builds every one.

On the embedded SQLite store, and on Postgres too with `--dsn` (each length in a fresh
database, dropped afterwards). Every measurement checks that the work it timed happened: the
queue still holds its N runs and no task moved; otherwise the script exits non-zero.
Figures, not a test: nothing asserts on time.

Run: .venv/bin/python bench/sweep_cost.py [--queued 100,5000,20000] [--repeat 5]
        [--dsn postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checked import happened
from fingerprint import timed
from leases import admin, database_url, fill_t25
from pipeline import make_repo

from core.config.schema import DATABASE_URL_ENV, load_config
from core.control.service import ControlPlane
from core.control.sweeper import ACTIVE, Sweeper
from core.domain.models import RunStatus, TaskState
from core.domain.states import WORKING
from store import open_store


async def measure(repo: Path, queued: int, repeat: int) -> tuple[float, float]:
    """The median pass and the median reference read, in ms, on the store `repo` names."""
    config = load_config(repo / "t25.yaml")
    await fill_t25(config.store_url, queued)
    store = await open_store(config.store_url)
    try:
        control = ControlPlane(config, store)
        sweeper = Sweeper(control)  # no workers: the queue stays as filled

        async def one_pass() -> None:
            await sweeper.sweep()
            happened(not await sweeper.idle(), "the pass found the queue empty")

        async def old_reads() -> None:
            active = {r.task_id for s in ACTIVE for r in await store.list_runs(status=s)}
            working = await store.list_tasks(states=[TaskState.RECEIVED, *WORKING])
            happened(len(active) == len(working) == queued, "the reference read another queue")

        await one_pass()  # warm: the first pass is not the one a sweeper repeats
        swept = await timed(repeat, one_pass)
        reference = await timed(repeat, old_reads)
        still = await store.list_runs(status=RunStatus.QUEUED)
        moved = await store.count_tasks()
        happened(len(still) == queued, f"{len(still)} of {queued} runs still queued")
        happened(moved == {TaskState.IMPLEMENTING: queued}, f"tasks moved: {moved}")
    finally:
        await store.close()
    return swept, reference


async def on_postgres(dsn: str, repo: Path, queued: int, repeat: int) -> tuple[float, float]:
    name = f"t25_bench_sweep_{uuid.uuid4().hex[:8]}"
    await admin(dsn, f"CREATE DATABASE {name}")
    os.environ[DATABASE_URL_ENV] = database_url(dsn, name)
    try:
        return await measure(repo, queued, repeat)
    finally:
        del os.environ[DATABASE_URL_ENV]
        await admin(dsn, f"DROP DATABASE {name} WITH (FORCE)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", default="100,5000,20000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dsn", help="also on this Postgres server")
    args = parser.parse_args()
    lengths = [int(n) for n in args.queued.split(",")]

    print(f"one sweeper pass and its idle check, median of {args.repeat}")
    print(
        f"{'store':<9} {'queued':>7} {'pass':>10} {'reference':>11}  (reading the queue as models)"
    )
    for queued in lengths:
        stores = ["sqlite", *(["postgres"] if args.dsn else [])]
        for kind in stores:
            with tempfile.TemporaryDirectory(prefix="t25-bench-sweep-") as tmp:
                repo = make_repo(Path(tmp) / "repo", 1)
                if kind == "postgres":
                    swept, ref = await on_postgres(args.dsn, repo, queued, args.repeat)
                else:
                    swept, ref = await measure(repo, queued, args.repeat)
            print(f"{kind:<9} {queued:>7,} {swept:>8.1f} ms {ref:>8.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
