"""`t25 run` and `t25 logs`: the pipeline at work, from the shell."""

from __future__ import annotations

import argparse
import asyncio
import sys

from core.events import (
    ApprovalRequested,
    Event,
    InputRequested,
    Resync,
    RunFinished,
    RunOutput,
    RunStarted,
    TaskTransitioned,
)
from core.models import TaskState, run_id, task_id
from core.service import Factory
from core.states import HUMAN_NEEDED
from t25_tui.commands.context import run


def floor_for(factory: Factory, **kw):
    """The in-process workers with the built-in adapters and the QA check runner."""
    from adapters.checks import run_check
    from adapters.registry import builtin_adapters
    from core.floor import Floor

    return Floor(factory, builtin_adapters(), run_check, **kw)


def describe(event: Event) -> str | None:
    """One progress line for the events a person watching `t25 run` cares about."""
    match event:
        case TaskTransitioned():
            why = f"  ({event.reason})" if event.reason else ""
            return f"{event.task_id}  {event.from_state} → {event.to_state}{why}"
        case RunStarted():
            return f"{event.task_id}  {event.run_id} started: {event.adapter_reason}"
        case RunFinished() if event.status != "succeeded":
            return f"{event.task_id}  {event.run_id} {event.status}: {event.error}"
        case ApprovalRequested():
            return (f"{event.task_id}  needs approval: {event.risk}-risk plan touching "
                    f"{', '.join(event.files) or 'no files'} — t25 approve {event.task_id}")
        case InputRequested():
            return f"{event.task_id}  asks: {event.question} — t25 answer {event.task_id} \"…\""
    return None


def run_(args: argparse.Namespace) -> int:
    async def body(factory: Factory) -> None:
        sub = factory.bus.subscribe()

        async def report() -> None:
            async for event in sub:
                line = None if isinstance(event, Resync) else describe(event)
                if line:
                    print(line, flush=True)

        printer = asyncio.create_task(report())
        try:
            await floor_for(factory, workers=args.workers).work(follow=args.follow)
        finally:
            await asyncio.sleep(0)  # let the last events print
            while (item := sub.get_nowait()) is not None:
                line = None if isinstance(item, Resync) else describe(item)
                if line:
                    print(line)
            printer.cancel()
            sub.close()
        waiting = await factory.store.list_tasks(states=[*HUMAN_NEEDED, TaskState.DONE,
                                                         TaskState.FAILED])
        pending = [t for t in waiting if not (t.state is TaskState.DONE and t.merged)]
        if pending:
            print("\nwaiting for a human:")
            for t in pending:
                what = {TaskState.AWAITING_APPROVAL: f"t25 approve {t.id}  (or reject)",
                        TaskState.NEEDS_INPUT: f"t25 answer {t.id} \"…\"",
                        TaskState.DONE: f"t25 merge {t.id}",
                        TaskState.FAILED: f"t25 task show {t.id}; t25 retry {t.id}"}[t.state]
                print(f"  {t.id}  {t.state:<17}  {what}")
        else:
            print("\nnothing is waiting for a human")

    run(args, body)
    return 0


def logs(args: argparse.Namespace) -> int:
    async def body(factory: Factory) -> None:
        ref = args.ref.strip()
        if ref[:1].upper() == "R":
            the_run = await factory.store.get_run(run_id(ref))
            if the_run is None:
                from core.errors import NotFound

                raise NotFound(f"no run {run_id(ref)}", hint="`t25 task show ID` lists a task's runs")
            tid, only_run = the_run.task_id, the_run.id
        else:
            tid, only_run = (await factory.task(task_id(ref))).id, None
        after = 0
        while True:
            events = await factory.store.events_after(after, task_id=tid, limit=5000)
            for event in events:
                after = event.id
                if only_run and event.run_id != only_run:
                    continue
                if isinstance(event, RunOutput):
                    (sys.stdout if event.stream == "stdout" else sys.stderr).write(event.text)
                elif isinstance(event, RunStarted | RunFinished) and not only_run:
                    print(f"\n── {event.run_id} {event.kind.replace('run_', '')} ──", flush=True)
            sys.stdout.flush()
            if events:
                continue
            if not args.follow or await _finished(factory, tid, only_run):
                return
            await asyncio.sleep(0.2)

    run(args, body)
    return 0


async def _finished(factory: Factory, tid: str, only_run: str | None) -> bool:
    if only_run:
        r = await factory.store.get_run(only_run)
        return r is not None and r.finished_at is not None
    task = await factory.store.get_task(tid)
    return task is None or task.state in (TaskState.DONE, TaskState.CANCELLED, TaskState.FAILED,
                                          *HUMAN_NEEDED)
