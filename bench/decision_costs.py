"""What one decision and one completion cost the store: its calls, by method, and its
write transactions.

On a real repository and the embedded SQLite store (the pipeline tests' sample project and
scripted agents), two moments of a task's life, each counted on its own:

- an approval as the cockpit makes it (t25_tui.tui.decision_flows): the task, the evidence
  its dialog shows (`Operations.approval_evidence`, the plan among it), then the decision
  (`Operations.decide`, bound to the plan read);
- the completion of an IMPLEMENTING run as a worker reports it (`RunQueue.complete`): the
  run recorded, its artifacts kept, the policies applied and the task moved on to QA.

For each: every store call by method, reads and writes apart, and the write transactions
SQLite began (`BEGIN IMMEDIATE`, traced). Counts, not times: they do not depend on the
machine, so the figures before and after a change are compared by running this at both.

It exits non-zero unless each moment happened as counted: the task reached the plan's
approval, the approval moved it on, and the completion went through the worker's queue and
left the task in QA, each with store calls and a write transaction counted.

Run:  .venv/bin/python bench/decision_costs.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checked import happened

from core.domain.decisions import Decision
from core.domain.models import TaskState
from core.domain.verbs import Verb
from tests.support.pipeline import Env
from tests.support.repos import make_shop

WRITES = (
    "put",
    "apply",
    "append",
    "enqueue",
    "enter",
    "move",
    "claim",
    "complete",
    "update",
    "set",
    "create",
)


class Counting:
    """The store, with each call counted by method while `on`."""

    def __init__(self, store: Any) -> None:
        self._store, self.calls, self.on = store, Counter[str](), False

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if not callable(found) or name.startswith("_"):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.on:
                self.calls[name] += 1
            return found(*args, **kwargs)

        return counted


async def _counted(
    counting: Counting, statements: list[str], step: Callable[[], Awaitable[Any]]
) -> tuple[Counter[str], int]:
    counting.calls.clear()
    statements.clear()
    counting.on = True
    try:
        await step()
    finally:
        counting.on = False
    begun = sum(1 for s in statements if s.strip().upper().startswith("BEGIN IMMEDIATE"))
    return Counter(counting.calls), begun


def _show(title: str, calls: Counter[str], begun: int) -> None:
    writes = {m: n for m, n in calls.items() if m.startswith(WRITES)}
    reads = {m: n for m, n in calls.items() if m not in writes}
    print(f"{title}: {sum(reads.values())} store reads, {sum(writes.values())} store writes, "
          f"{begun} write transactions")  # fmt: skip
    for kind, found in (("reads", reads), ("writes", writes)):
        listed = ", ".join(f"{m} {n}" for m, n in sorted(found.items(), key=lambda i: -i[1]))
        print(f"  {kind}: {listed or '-'}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as where:
        env = Env(make_shop(Path(where)))
        control = await env.open(approval={"require_for_risk": ["low", "medium", "high"]})
        try:
            counting = Counting(control.store)
            statements: list[str] = []
            await control.store._db.set_trace_callback(statements.append)
            control.store = counting  # type: ignore[assignment]
            task = await env.new()
            sweeper = env.sweeper(workers=1)
            worker = sweeper.pool.workers[0]
            for _ in range(10):  # to the plan's approval, a stage at a time
                await sweeper.sweep()
                if (await env.task(task.id)).state is TaskState.AWAITING_APPROVAL:
                    break
                await worker.run_once()
            at = (await env.task(task.id)).state
            happened(at is TaskState.AWAITING_APPROVAL, f"the task never waited for approval: {at}")

            async def approve() -> None:  # as the cockpit's decide dialog (`a`) does
                await control.task(task.id)
                shown = await control.approval_evidence(task.id)
                bound = shown.plan_sha256
                decision = Decision(verb=Verb.APPROVE, task=task.id, actor="ana", bound_to=bound)
                await control.decide(decision)

            calls, begun = await _counted(counting, statements, approve)
            at = (await env.task(task.id)).state
            happened(
                at is not TaskState.AWAITING_APPROVAL and begun > 0,
                f"the approval left the task {at} after {sum(calls.values())} store calls and "
                f"{begun} write transactions",
            )
            _show("an approval from the cockpit (task, evidence, decision)", calls, begun)

            queue = worker.runs.runs  # the worker's LocalRunQueue, under its patience
            completing = queue.complete

            async def complete(lease: Any, report: Any) -> None:
                nonlocal calls, begun

                async def once() -> None:
                    await completing(lease, report)

                calls, begun = await _counted(counting, statements, once)

            queue.complete = complete
            calls, begun = Counter(), 0
            await sweeper.sweep()
            await worker.run_once()  # IMPLEMENTING, completed through `complete` above
            at = (await env.task(task.id)).state
            happened(
                at is TaskState.QA and sum(calls.values()) > 0 and begun > 0,
                f"the IMPLEMENTING run left the task {at}; through the worker's queue "
                f"{sum(calls.values())} store calls, {begun} write transactions",
            )
            _show("the completion of an IMPLEMENTING run", calls, begun)
        finally:
            await env.close()


if __name__ == "__main__":
    asyncio.run(main())
