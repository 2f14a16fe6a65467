"""What a plan's approval and a QA run read of the past: at 100, 10,000 and 100,000 finished
tasks, the approval's evidence (its estimate of the stages left, from the project's past
runs) and the baseline a QA prompt compares with (the checks the newest merge kept).

The history is bench/history.py's (one finished task with its run through the Store API,
copied in SQL to the size asked, then 40 tasks still in the pipeline), its copied runs
turned into succeeded dev runs so that the estimate has them to sum, and one kept baseline.
For each size, in-process on the same SQLite store, median of `--repeat`:

- the approval's evidence of the task awaiting approval (`ControlPlane.approval_evidence`),
  beside the reads its estimate made before (every task of the project and every succeeded
  run of the store, as models);
- the baseline (`core.control.baselines.latest`), beside the reads it made before (every
  task of the project and every artifact of the store).

Each figure is checked: the estimate counted every past dev run, and the baseline read is the
one kept; otherwise the script exits non-zero. Figures, not a test: nothing asserts on time.

Run:  .venv/bin/python bench/evidence_reads.py [--finished 100,10000,100000] [--repeat 5]
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checked import happened
from fingerprint import timed_each
from history import history_args, on_history

from core.config.schema import load_config
from core.control import baselines
from core.control.service import ControlPlane
from core.domain.figures import Baseline
from core.domain.models import ArtifactKind, ArtifactMeta, RunStatus, TaskState
from store import open_store


def as_dev_runs(db: Path, finished: int) -> None:
    """The finished tasks' runs become succeeded dev runs of the model the demo's dev uses."""
    with sqlite3.connect(db) as con:
        con.execute(
            "UPDATE runs SET role = 'dev', stage = 'IMPLEMENTING', model = NULL WHERE task_id <= ?",
            (finished,),
        )


async def measure(repo: Path, finished: int, repeat: int) -> dict[str, float]:
    as_dev_runs(repo / ".factory" / "t25.db", finished)
    config = load_config(repo / "t25.yaml")
    control = ControlPlane(config, await open_store(config.store_url))
    store = control.store
    try:
        first = (await store.list_tasks(limit=1, include_archived=True))[0]
        kept = Baseline(branch="trunk", commit="0" * 40, task_id=first.id)
        meta = ArtifactMeta(
            kind=ArtifactKind.MERGE_CHECKS, media_type=baselines.MEDIA, task_id=first.id
        )
        await store.put_artifact(kept.model_dump_json().encode(), meta)
        waiting = (await store.list_tasks(states=[TaskState.AWAITING_APPROVAL]))[0]

        async def evidence() -> None:
            shown = await control.approval_evidence(waiting.id)
            dev = next(e for e in shown.estimate if e.role == "dev")
            happened(dev.runs == finished, f"the estimate counted {dev.runs} of {finished} runs")

        async def evidence_before() -> None:
            await store.list_tasks(project="shop", include_archived=True)
            await store.list_runs(status=RunStatus.SUCCEEDED)

        async def baseline() -> None:
            happened(await baselines.latest(store, "shop") == kept, "the baseline was not read")

        async def baseline_before() -> None:
            await store.list_tasks(project="shop", include_archived=True)
            await store.list_artifacts()

        return await timed_each(
            repeat,
            [
                ("evidence", evidence),
                ("evidence before", evidence_before),
                ("baseline", baseline),
                ("baseline before", baseline_before),
            ],
        )
    finally:
        await store.close()


def main() -> None:
    args = history_args(__doc__)
    print(f"median of {args.repeat}, SQLite")
    print(f"{'finished':>9}  {'evidence':>10} {'before':>10}   {'baseline':>10} {'before':>10}")
    for finished in args.finished:
        f = on_history(finished, lambda repo, n=finished: measure(repo, n, args.repeat))
        print(
            f"{finished:>9,}  {f['evidence']:>7.1f} ms {f['evidence before']:>7.1f} ms   "
            f"{f['baseline']:>7.1f} ms {f['baseline before']:>7.1f} ms"
        )


if __name__ == "__main__":
    main()
