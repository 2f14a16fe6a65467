"""Lease throughput: claim-and-complete of T25's store, side by side with pgqueuer.

For 1, 4 and 16 workers, each with a connection of its own, every worker loops
"claim the oldest queued run, complete it under its token" until the queue is empty:
on T25's Postgres store (one statement to claim with FOR UPDATE SKIP LOCKED, one to
complete with the fencing check and its RunFinished event row), on pgqueuer doing the
equivalent dequeue and acknowledge at batch size 1 against the same server, and on
T25's embedded SQLite store for reference. Prints runs per second.

pgqueuer is not a T25 dependency. It runs in an environment of its own, in a child
process of this script; make that environment once:

    python3 -m venv /tmp/t25-bench-pgq
    /tmp/t25-bench-pgq/bin/pip install pgqueuer asyncpg==0.32.0

Run:
    .venv/bin/python bench/leases.py [--runs 5000] [--workers 1,4,16]
        [--dsn postgresql://postgres@127.0.0.1:5432/postgres]
        [--processes 1] [--repeat 3] [--pgqueuer-python /tmp/t25-bench-pgq/bin/python]

`--processes` spreads the workers of each count over that many OS processes (same
split for T25 and pgqueuer). One is the default: on a 2-CPU machine the client uses
about half a core at 16 workers (T25's; pgqueuer's about a quarter), and more
processes only compete with the server for the CPUs. A Unix-socket DSN
(`postgresql://postgres@/postgres?host=/var/run/postgresql`) spares both contenders
the loopback TCP cost. Every measurement uses a fresh database, dropped afterwards; each
figure is the median of `--repeat` measurements, taken in turn with the other
contenders' so that a busy moment of the machine does not favour one of them.
Figures, not a test: nothing asserts on time.

What migration 0007 costs (one queued or running run per task and stage, a unique index
kept on every claim and completion; a store-wide token sequence; the claim's key), on the
shared 2-CPU development machine at load 1.1 to 1.5, `--skip pgqueuer --runs 2000
--repeat 3`, two rounds each, taken in turn: Postgres, 1 / 4 / 16 workers, 821 / 1,397 /
1,954 and 801 / 1,297 / 1,886 runs/s before, 781 / 1,302 / 1,731 and 772 / 1,415 / 1,672
after: a few per cent with few workers, about a tenth at 16.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DSN = os.environ.get("T25_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
DEFAULT_PGQ_PYTHON = os.environ.get("T25_BENCH_PGQUEUER_PYTHON", "/tmp/t25-bench-pgq/bin/python")
TTL_S = 60.0


def database_url(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


async def admin(dsn: str, statement: str) -> None:
    import asyncpg

    con = await asyncpg.connect(dsn)
    try:
        await con.execute(statement)
    finally:
        await con.close()


# -- the workers of one process (run in children: `--child t25|sqlite|pgqueuer`) ------------------


async def t25_workers(url: str, workers: int, start_at: float) -> int:
    sys.path.insert(0, str(ROOT))
    from core.domain.models import RunOutcome, RunStatus
    from store import open_store

    done = RunOutcome(status=RunStatus.SUCCEEDED, exit_code=0)
    stores = [await open_store(url) for _ in range(workers)]

    async def work(store, name: str) -> int:
        n = 0
        while (lease := await store.claim_run(name, TTL_S)) is not None:
            await store.complete_run(lease, done)
            n += 1
        return n

    await asyncio.sleep(max(0.0, start_at - time.time()))
    counts = await asyncio.gather(*(work(s, f"w{os.getpid()}-{i}") for i, s in enumerate(stores)))
    for s in stores:
        await s.close()
    return sum(counts)


async def pgqueuer_workers(url: str, workers: int, start_at: float) -> int:
    from datetime import timedelta

    import asyncpg
    from pgqueuer.queries import EntrypointExecutionParameter, Queries

    cons = [await asyncpg.connect(url) for _ in range(workers)]
    entrypoints = {"bench": EntrypointExecutionParameter(concurrency_limit=0)}

    async def work(con) -> int:
        queries, manager, n = Queries.from_asyncpg_connection(con), uuid.uuid4(), 0
        while jobs := await queries.dequeue(
            batch_size=1,
            entrypoints=entrypoints,
            queue_manager_id=manager,
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=TTL_S),
        ):
            await queries.log_jobs([(job, "successful", None) for job in jobs])
            n += len(jobs)
        return n

    await asyncio.sleep(max(0.0, start_at - time.time()))
    counts = await asyncio.gather(*(work(c) for c in cons))
    for c in cons:
        await c.close()
    return sum(counts)


def child(kind: str, url: str, workers: int, start_at: float) -> None:
    run = {"t25": t25_workers, "sqlite": t25_workers, "pgqueuer": pgqueuer_workers}[kind]
    print(json.dumps({"done": asyncio.run(run(url, workers, start_at)), "end": time.time()}))


# -- setting up a queue, and timing its workers --------------------------------------------------


async def fill_t25(url: str, runs: int) -> None:
    """Queue `runs` runs, each of a task of its own (a stage has one queued or running run),
    the way create_task and enqueue_run write them (on Postgres in two statements, to be
    quick)."""
    sys.path.insert(0, str(ROOT))
    from core.domain.models import NewTask, Project
    from store import open_store

    store = await open_store(url)
    try:
        await store.upsert_project(Project(name="bench", repo_path="/bench", default_branch="main"))
        if url.startswith("sqlite"):
            for i in range(runs):
                new = NewTask(project="bench", title=f"bench {i}")
                task, _ = await store.create_task(new, actor="bench")
                await store.enqueue_run(_new_run(task.id))
        else:
            import asyncpg

            con = await asyncpg.connect(url)
            try:
                await con.execute(
                    "INSERT INTO tasks (project, title, type, description, state, created_at, state_since) "
                    "SELECT 'bench', 'bench ' || n, 'feat', '', 'IMPLEMENTING', now(), now() "
                    "FROM generate_series(1, $1) AS n",
                    runs,
                )
                await con.execute(
                    "INSERT INTO runs (task_id, stage, role, not_before, enqueued_at) "
                    "SELECT id, 'IMPLEMENTING', 'dev', clock_timestamp(), clock_timestamp() "
                    "FROM tasks ORDER BY id",
                )
            finally:
                await con.close()
    finally:
        await store.close()


def _new_run(task_id: str):
    from core.domain.models import NewRun, TaskState

    return NewRun(task_id=task_id, stage=TaskState.IMPLEMENTING, role="dev")


async def fill_pgqueuer(url: str, runs: int) -> None:
    import asyncpg
    from pgqueuer.queries import Queries

    con = await asyncpg.connect(url)
    try:
        queries = Queries.from_asyncpg_connection(con)
        await queries.install()
        await queries.enqueue(["bench"] * runs, [None] * runs, [0] * runs)
    finally:
        await con.close()


async def check_t25(url: str, runs: int, done: int) -> None:
    """The figure counts only if every run finished exactly once, under its first lease."""
    from collections import Counter

    from core.domain.events import RunFinished
    from store import open_store

    store = await open_store(url)
    try:
        listed = await store.list_runs()
        finished = Counter(
            e.run_id
            for e in await store.events_after(0, limit=10 * runs)
            if isinstance(e, RunFinished)
        )
    finally:
        await store.close()
    wrong = [r for r in listed if (r.status.value, r.attempts) != ("succeeded", 1)]
    if len({r.lease_token for r in listed}) != len(listed):
        wrong += listed  # a token names one claim in the whole store
    twice = {run: n for run, n in finished.items() if n != 1}
    if len(listed) != runs or wrong or twice or len(finished) != runs or done != runs:
        raise SystemExit(
            f"{url}: {len(listed)} runs, {done} completions reported, {len(finished)} finished; "
            f"not finished once under a token of its own: {wrong[:3]}; finished more than once: "
            f"{list(twice.items())[:3]}"
        )


def timed(kind: str, python: str, url: str, workers: int, processes: int) -> tuple[int, float]:
    """Start the workers in `processes` children at one agreed instant; runs done, seconds."""
    per = [workers // processes + (1 if i < workers % processes else 0) for i in range(processes)]
    start_at = time.time() + 1.5  # enough for every child to import and connect first
    children = [
        subprocess.Popen(
            [python, __file__, "--child", kind, url, str(n), repr(start_at)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in per
        if n
    ]
    results = []
    for c in children:
        out, _ = c.communicate()
        if c.returncode != 0:
            raise SystemExit(f"a {kind} benchmark child failed (exit {c.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return sum(r["done"] for r in results), max(r["end"] for r in results) - start_at


def measure(kind: str, dsn: str, runs: int, workers: int, processes: int, pgq_python: str) -> float:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/t25.db"
            asyncio.run(fill_t25(url, runs))
            done, seconds = timed(kind, sys.executable, url, workers, processes)
            asyncio.run(check_t25(url, runs, done))
    else:
        name = f"t25_bench_{uuid.uuid4().hex[:12]}"
        url = database_url(dsn, name)
        asyncio.run(admin(dsn, f'CREATE DATABASE "{name}"'))
        try:
            if kind == "t25":
                asyncio.run(fill_t25(url, runs))
                done, seconds = timed(kind, sys.executable, url, workers, processes)
                asyncio.run(check_t25(url, runs, done))
            else:
                subprocess.run(
                    [pgq_python, __file__, "--fill-pgqueuer", url, str(runs)], check=True, cwd=ROOT
                )
                done, seconds = timed(kind, pgq_python, url, workers, processes)
        finally:
            asyncio.run(admin(dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    if done != runs:
        raise SystemExit(f"{kind} with {workers} workers finished {done} of {runs} runs")
    return done / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--pgqueuer-python", default=DEFAULT_PGQ_PYTHON)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each figure; the median is shown"
    )
    parser.add_argument("--skip", default="", help="comma-separated: t25, pgqueuer, sqlite")
    parser.add_argument(
        "--child", nargs=4, metavar=("KIND", "URL", "WORKERS", "START_AT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--fill-pgqueuer", nargs=2, metavar=("URL", "RUNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, url, workers, start_at = args.child
        child(kind, url, int(workers), float(start_at))
        return
    if args.fill_pgqueuer:
        asyncio.run(fill_pgqueuer(args.fill_pgqueuer[0], int(args.fill_pgqueuer[1])))
        return

    kinds = [k for k in ("t25", "pgqueuer", "sqlite") if k not in args.skip.split(",")]
    if "pgqueuer" in kinds and not Path(args.pgqueuer_python).exists():
        raise SystemExit(
            f"no pgqueuer environment at {args.pgqueuer_python}; see this script's docstring"
        )
    counts = [int(w) for w in args.workers.split(",")]
    print(
        f"claim-and-complete, {args.runs} runs per figure, median of {args.repeat}, workers over "
        f"{args.processes} processes, {os.cpu_count()} CPUs; runs/s"
    )
    label = {
        "t25": "T25 Postgres",
        "pgqueuer": "pgqueuer (batch 1)",
        "sqlite": "T25 SQLite (reference)",
    }
    print(
        f"{'workers':>8} "
        + " ".join(f"{label[k]:>24}" for k in kinds)
        + (f" {'T25 / pgqueuer':>15}" if {"t25", "pgqueuer"} <= set(kinds) else "")
    )
    for workers in counts:
        samples: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.repeat):
            for k in kinds:
                samples[k].append(
                    measure(
                        k,
                        args.dsn,
                        args.runs,
                        workers,
                        min(args.processes, workers),
                        args.pgqueuer_python,
                    )
                )
        figures = {k: statistics.median(v) for k, v in samples.items()}
        ratio = (
            f" {figures['t25'] / figures['pgqueuer']:>14.1f}x"
            if {"t25", "pgqueuer"} <= set(kinds)
            else ""
        )
        print(
            f"{workers:>8} " + " ".join(f"{figures[k]:>24,.0f}" for k in kinds) + ratio, flush=True
        )


if __name__ == "__main__":
    main()
