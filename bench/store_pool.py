"""The Postgres store's own connection pool against asyncpg's, on the work a control plane does.

One process, one store, as in `t25 serve`: every call of its workers and readers borrows a
connection from the store's pool for one operation. The mix, for `--tasks` tasks of
`--stages` stages each:

- `--workers` workers loop: claim a run, stream `--output` small RunOutput events
  (append_event), heartbeat every `--heartbeat-every` of them, complete the run, move the
  task on (apply_transition) and queue its next stage's run, until every stage is done;
- `--tails` readers follow the events table as serve's SSE tail does: wait_for_events,
  then events_after their cursor;
- one board reader, as a cockpit refreshing: list_tasks, then cost_by_task, in a loop.

The same store code runs over three pools: T25's own (`store.postgres_schema.ConnectionPool`),
asyncpg's `create_pool` as it comes (its release resets the session: one more round trip), and
asyncpg's with that reset left out (what the store would use: it never changes session
state). Both pools get the same size (1 to 10 connections, the store's default) and the same
text codec. For each: the wall time of the whole pipeline, the operations per second, the
median and 99th-percentile latency of each kind of call, and how many reads the readers
managed meanwhile. Every measurement uses a fresh database, dropped afterwards; the pools
take turns, `--repeat` times, and each figure is the median of those.

Run:
    .venv/bin/python bench/store_pool.py [--tasks 60] [--stages 4] [--workers 8]
        [--output 40] [--tails 2] [--repeat 3] [--dsn postgresql://postgres@127.0.0.1:5432/postgres]

Figures, not a test: nothing asserts on time; but it exits non-zero unless each measurement
did the whole mix: every run completed once, every output event appended, every task DONE,
and the readers read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from checked import happened

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.domain.events import RunOutput, TaskTransitioned
from core.domain.models import (
    NewRun,
    NewTask,
    Project,
    RunOutcome,
    RunStatus,
    TaskState,
    Usage,
)
from store import postgres_schema as schema
from store.postgres import PostgresStore

T = TypeVar("T")
DEFAULT_DSN = os.environ.get("T25_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
STAGES = [TaskState.SPEC, TaskState.PLAN, TaskState.IMPLEMENTING, TaskState.QA, TaskState.REVIEW]
MIN_SIZE, MAX_SIZE = 1, 10  # PostgresStore.open's defaults
TTL_S = 60.0


# -- the store over asyncpg's pool ------------------------------------------------------------


async def _text_codec(con: asyncpg.Connection) -> None:
    """What store.postgres_schema does to each connection it opens: NUL kept as U+FFFD."""
    await con.set_type_codec(
        "text",
        schema="pg_catalog",
        format="text",
        encoder=lambda value: value.replace("\x00", "\ufffd"),
        decoder=str,
    )


async def _keep_session(con: asyncpg.Connection) -> None:
    """A reset that sends nothing: the store never changes session state."""


class AsyncpgPoolStore(PostgresStore):
    """PostgresStore lending connections from `asyncpg.create_pool`: each operation in
    `async with pool.acquire()`. Without the store's retries on a lost connection: nothing
    is lost here, and leaving them out can only favour asyncpg's pool."""

    @classmethod
    async def open_on_asyncpg_pool(cls, url: str, *, reset: bool) -> AsyncpgPoolStore:
        await schema.migrate(url)
        pool = await asyncpg.create_pool(
            url,
            min_size=MIN_SIZE,
            max_size=MAX_SIZE,
            init=_text_codec,
            reset=None if reset else _keep_session,
            server_settings={"application_name": "t25"},
        )
        return cls(pool, url, "t25")  # the store lends from it as from its own

    async def _run(self, op: Callable[[Any, bool], Awaitable[T]]) -> T:
        async with self._pool.acquire() as con:
            return await op(con, False)


POOLS: dict[str, Callable[[str], Awaitable[PostgresStore]]] = {
    "T25's pool": PostgresStore.open,
    "asyncpg pool": lambda url: AsyncpgPoolStore.open_on_asyncpg_pool(url, reset=True),
    "asyncpg, no reset": lambda url: AsyncpgPoolStore.open_on_asyncpg_pool(url, reset=False),
}


# -- the mix ------------------------------------------------------------------------------------


class Timings:
    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = defaultdict(list)

    async def time(self, kind: str, call: Awaitable[T]) -> T:
        start = time.perf_counter()
        result = await call
        self.calls[kind].append(time.perf_counter() - start)
        return result


async def pipeline(store: PostgresStore, args: argparse.Namespace) -> dict[str, Any]:
    await store.upsert_project(Project(name="bench", repo_path="/tmp/bench", default_branch="main"))
    stages = STAGES[: args.stages]
    for n in range(args.tasks):
        task, _ = await store.create_task(NewTask(project="bench", title=f"task {n}"), actor="b")
        moved, _ = await store.apply_transition(
            task.id,
            TaskState.RECEIVED,
            TaskTransitioned(from_state=TaskState.RECEIVED, to_state=stages[0], actor="b"),
            {},
        )
        await store.enqueue_run(NewRun(task_id=moved.id, stage=stages[0], role="r"))
    timings = Timings()
    finished = asyncio.Event()
    remaining = args.tasks * len(stages)
    reads = {"tail": 0, "board": 0}
    done = RunOutcome(
        status=RunStatus.SUCCEEDED, exit_code=0, usage=Usage(input_tokens=10), cost_usd=0.01
    )

    async def worker(name: str) -> None:
        nonlocal remaining
        while remaining > 0:
            lease = await timings.time("claim_run", store.claim_run(name, TTL_S))
            if lease is None:
                await asyncio.sleep(0.002)
                continue
            run = await store.get_run(lease.run_id)
            assert run is not None
            for i in range(args.output):
                line = f"{run.stage} line {i}: compiling module {i}, 3 warnings\n"
                await timings.time(
                    "append_event",
                    store.append_event(
                        RunOutput(task_id=run.task_id, run_id=run.id, stream="stdout", text=line)
                    ),
                )
                if (i + 1) % args.heartbeat_every == 0:
                    lease = await timings.time("heartbeat", store.heartbeat(lease, TTL_S))
            await timings.time("complete_run", store.complete_run(lease, done))
            at = stages.index(run.stage)
            after = stages[at + 1] if at + 1 < len(stages) else TaskState.DONE
            await timings.time(
                "apply_transition",
                store.apply_transition(
                    run.task_id,
                    run.stage,
                    TaskTransitioned(from_state=run.stage, to_state=after, actor="t25"),
                    {},
                ),
            )
            if after is not TaskState.DONE:
                await store.enqueue_run(NewRun(task_id=run.task_id, stage=after, role="r"))
            remaining -= 1
        finished.set()

    async def tail() -> None:
        cursor = await store.last_event_id()
        while not finished.is_set():
            await store.wait_for_events(cursor, 0.2)
            batch = await timings.time("events_after", store.events_after(cursor, limit=1000))
            if batch:
                cursor = batch[-1].id
            reads["tail"] += 1

    async def board() -> None:
        while not finished.is_set():
            await timings.time("list_tasks", store.list_tasks())
            await timings.time("cost_by_task", store.cost_by_task())
            reads["board"] += 1

    start = time.perf_counter()
    readers = [asyncio.create_task(tail()) for _ in range(args.tails)]
    readers.append(asyncio.create_task(board()))
    await asyncio.wait_for(
        asyncio.gather(*(worker(f"w{n}") for n in range(args.workers))), args.timeout
    )
    wall = time.perf_counter() - start
    finished.set()
    await asyncio.gather(*readers)
    runs = args.tasks * len(stages)
    ended = [t.state for t in await store.list_tasks()]
    happened(
        len(timings.calls["complete_run"]) == runs
        and len(timings.calls["append_event"]) == runs * args.output
        and ended == [TaskState.DONE] * args.tasks
        and reads["board"] > 0
        and (reads["tail"] > 0 or args.tails == 0),
        f"{len(timings.calls['complete_run'])} of {runs} runs completed, "
        f"{len(timings.calls['append_event'])} of {runs * args.output} events appended, "
        f"{ended.count(TaskState.DONE)} of {args.tasks} tasks DONE, reads {reads}",
    )
    ops = sum(len(v) for v in timings.calls.values())
    return {"wall": wall, "ops_s": ops / wall, "calls": timings.calls, **reads}


# -- measuring ----------------------------------------------------------------------------------


def database_url(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


@asynccontextmanager
async def fresh_database(dsn: str) -> AsyncIterator[str]:
    name = f"t25_bench_pool_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield database_url(dsn, name)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    async with fresh_database(args.dsn) as url:
        store = await POOLS[kind](url)
        try:
            return await pipeline(store, args)
        finally:
            await store.close()


def percentile(values: list[float], q: float) -> float:
    if not values:  # a call the mix did not make at this size (a heartbeat, say)
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--stages", type=int, default=4, choices=range(1, len(STAGES) + 1))
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--output", type=int, default=40, help="RunOutput events per run")
    parser.add_argument("--heartbeat-every", type=int, default=10)
    parser.add_argument("--tails", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    runs = args.tasks * args.stages
    print(
        f"{args.tasks} tasks x {args.stages} stages = {runs} runs, {args.workers} workers, "
        f"{args.output} output events a run ({runs * args.output} in all), "
        f"{args.tails} tails and a board reading; median of {args.repeat}"
    )
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _ in range(args.repeat):
        for kind in POOLS:  # in turn: a busy moment of the machine favours none of them
            results[kind].append(await measure(kind, args))
    kinds = list(POOLS)
    width = 22
    print(f"\n{'':24}" + "".join(f"{k:>{width}}" for k in kinds))

    def row(label: str, figure: Callable[[dict[str, Any]], float], unit: str) -> None:
        cells = [statistics.median(figure(r) for r in results[k]) for k in kinds]
        print(f"{label:24}" + "".join(f"{c:>{width - len(unit) - 1}.2f} {unit}" for c in cells))

    row("pipeline wall time", lambda r: r["wall"], "s")
    row("store calls", lambda r: r["ops_s"], "/s")
    row("tail reads", lambda r: r["tail"] / r["wall"], "/s")
    row("board reads", lambda r: r["board"] / r["wall"], "/s")
    for call in (
        "claim_run",
        "append_event",
        "heartbeat",
        "complete_run",
        "apply_transition",
        "events_after",
        "list_tasks",
        "cost_by_task",
    ):
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            row(
                f"{call} {name}",
                lambda r, call=call, q=q: percentile(r["calls"][call], q) * 1000,
                "ms",
            )


if __name__ == "__main__":
    asyncio.run(main())
