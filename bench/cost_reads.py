"""What `t25 cost`, the cockpit's cost pane and the board's token budgets read: at 100, 10,000
and 100,000 finished tasks, each beside the reads it made before (every run of the store, as
models, summed in Python).

The history is bench/history.py's (one finished task with its run through the Store API,
copied in SQL to the size asked, then 40 tasks still in the pipeline, 36 of them not
settled). For each size,
in-process on the same SQLite store, median of `--repeat`:

- `t25 cost`'s summary (`Operations.cost`: the store sums the runs in groups), beside
  `summarize` over every run read;
- the cost pane's reads (the summary in total and today, the 50 costliest tasks), beside every
  run read and summed twice and per task;
- the board's token budgets (`Operations.tokens_by_task` of the 36 unsettled tasks), beside
  every run read and its tokens summed per task.

Each figure is checked: the summary counted every run of the store, the costliest tasks are
50, the budgets' read found the 36; otherwise the script exits non-zero. Figures, not a test:
nothing asserts on time.

Run:  .venv/bin/python bench/cost_reads.py [--finished 100,10000,100000] [--repeat 5]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from datetime import UTC, datetime, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checked import happened, sqlite_count
from fingerprint import timed_each
from history import SPREAD, UNFINISHED, history_args, on_history

from core.config.schema import load_config
from core.control.cost import summarize
from core.control.service import ControlPlane
from core.domain.cost import COSTLIEST, tokens_of
from core.domain.models import Run, TaskState
from store import open_store

SETTLED = (TaskState.DONE, TaskState.CANCELLED)  # the board holds no budget against these
UNSETTLED = [s for s in TaskState if s not in SETTLED]
# history.py's unfinished tasks the board holds token budgets against (DONE, unmerged, not)
BUDGETED = sum(1 for n in range(UNFINISHED) if SPREAD[n % len(SPREAD)] not in SETTLED)


async def measure(repo: Path, repeat: int) -> dict[str, float]:
    config = load_config(repo / "t25.yaml")
    control = ControlPlane(config, await open_store(config.store_url))
    store = control.store
    runs = sqlite_count(repo / ".factory" / "t25.db", "SELECT count(*) FROM runs")
    midnight = datetime.combine(datetime.now(UTC).date(), time(), tzinfo=UTC)
    try:
        active = [t.id for t in await store.list_tasks(states=UNSETTLED)]
        happened(len(active) == BUDGETED, f"{len(active)} unsettled tasks, not {BUDGETED}")

        async def cost() -> None:
            summary = await control.cost()
            happened(summary.runs == runs, f"the summary counted {summary.runs} of {runs} runs")

        async def cost_before() -> None:
            summarize(await store.list_runs())

        async def pane() -> None:
            await control.cost()
            await control.cost(since=midnight)
            costliest = await control.costliest_tasks(COSTLIEST)
            happened(len(costliest) == COSTLIEST, f"{len(costliest)} costliest tasks")

        async def pane_before() -> None:
            every = await store.list_runs()
            summarize(every)
            summarize([r for r in every if (r.finished_at or r.enqueued_at) >= midnight])
            per_task: dict[str, list[Run]] = defaultdict(list)
            for run in every:
                per_task[run.task_id].append(run)
            ranked = sorted(per_task.values(), key=lambda of: -sum(r.cost_usd for r in of))
            for of_task in ranked[:COSTLIEST]:
                summarize(of_task)

        async def budgets() -> None:
            used = await control.tokens_by_task(active)
            happened(len(used) == BUDGETED, f"tokens of {len(used)} of {BUDGETED} tasks read")

        async def budgets_before() -> None:
            used: dict[str, int] = {}
            for run in await store.list_runs():
                used[run.task_id] = used.get(run.task_id, 0) + tokens_of(run.usage)

        return await timed_each(
            repeat,
            [
                ("cost", cost),
                ("cost before", cost_before),
                ("pane", pane),
                ("pane before", pane_before),
                ("budgets", budgets),
                ("budgets before", budgets_before),
            ],
        )
    finally:
        await store.close()


def main() -> None:
    args = history_args(__doc__)
    print(f"median of {args.repeat}, SQLite; each read beside the reads it made before")
    print(f"{'finished':>9}  {'t25 cost':>21}   {'cost pane':>21}   {'token budgets':>21}")
    for finished in args.finished:
        f = on_history(finished, lambda repo: measure(repo, args.repeat))
        print(
            f"{finished:>9,}  "
            + "   ".join(
                f"{f[name]:>7.1f} vs {f[name + ' before']:>7.1f} ms"
                for name in ("cost", "pane", "budgets")
            )
        )


if __name__ == "__main__":
    main()
