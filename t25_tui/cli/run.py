"""`t25 run` and `t25 logs`: the pipeline at work, from the shell."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING

from core.domain.events import (
    ApprovalRequested,
    Event,
    InputRequested,
    Resync,
    RunFinished,
    RunOutput,
    RunStarted,
    TaskTransitioned,
)
from core.domain.models import ArtifactKind, TaskState
from core.domain.states import HUMAN_NEEDED
from core.domain.text import printable
from core.errors import NotFound
from core.ports import Operations
from t25_tui.cli.context import run, run_runtime

if TYPE_CHECKING:
    from t25_tui.runtime import Runtime

# `t25 run` exits with this, after its summary, when a task it worked ended FAILED; 1 stays
# "T25 could not do what was asked" (a broken config, an unreachable store), 2 a usage error.
TASKS_FAILED_EXIT = 3


def describe(event: Event) -> str | None:
    """One progress line for the events a person watching `t25 run` cares about.

    Reasons, errors and questions come from agents and operators: escaped for the terminal."""
    match event:
        case TaskTransitioned():
            why = f"  ({printable(event.reason)})" if event.reason else ""
            return f"{event.task_id}  {event.from_state} → {event.to_state}{why}"
        case RunStarted():
            reason = printable(event.adapter_reason or "")
            return f"{event.task_id}  {event.run_id} started: {reason}"
        case RunFinished() if event.status != "succeeded":
            return f"{event.task_id}  {event.run_id} {event.status}: {printable(event.error or '')}"
        case ApprovalRequested():
            files = printable(", ".join(event.files)) or "no files"
            return (
                f"{event.task_id}  needs approval: {printable(event.risk)}-risk plan touching "
                f"{files} — t25 approve {event.task_id}"
            )
        case InputRequested():
            return (
                f"{event.task_id}  asks: {printable(event.question)} — "
                f't25 answer {event.task_id} "…"'
            )
    return None


def run_(args: argparse.Namespace) -> int:
    stopped_by: list[signal.Signals] = []

    async def body(runtime: Runtime) -> bool:
        control, sweeper = runtime.operations, runtime.sweeper
        assert sweeper is not None  # the runtime was opened with a crew
        sub = control.bus.subscribe()
        # The bus carries this process's own events only: a task seen going to FAILED here
        # was failed by the runs this `t25 run` worked.
        failed_here: set[str] = set()

        def show(item: Event | Resync) -> None:
            if isinstance(item, TaskTransitioned) and item.to_state is TaskState.FAILED:
                failed_here.add(item.task_id or "")
            line = None if isinstance(item, Resync) else describe(item)
            if line:
                print(line, flush=True)

        async def report() -> None:
            async for item in sub:
                show(item)

        printer = asyncio.create_task(report())
        working = asyncio.create_task(sweeper.work(follow=args.follow))

        # SIGTERM, or SIGHUP (a dropped SSH session): stop the agents, hand the runs back.
        def stop(sig: signal.Signals) -> None:
            stopped_by.append(sig)
            working.cancel()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop, sig)
        try:
            await asyncio.wait([printer, working], return_when=asyncio.FIRST_COMPLETED)
        finally:
            # The printer ends only by failing (stdout closed: `t25 run | head`); then, as
            # when interrupted, the workers stop their agents and hand their runs back.
            if not working.done():
                working.cancel()
            await asyncio.gather(working, return_exceptions=True)
            printer.cancel()
            await asyncio.gather(printer, return_exceptions=True)
        failed_to_print = None if printer.cancelled() else printer.exception()
        if failed_to_print is not None:
            raise failed_to_print
        if stopped_by:
            print(
                f"t25 run: stopped by {stopped_by[0].name}; its agents were stopped and their "
                "runs handed back (`t25 run` again carries on)",
                file=sys.stderr,
            )
            return False
        working.result()
        await asyncio.sleep(0)  # let the last events arrive
        while (item := sub.get_nowait()) is not None:
            show(item)
        sub.close()
        waiting = await control.tasks(states=[*HUMAN_NEEDED, TaskState.DONE, TaskState.FAILED])
        pending = [t for t in waiting if not (t.state is TaskState.DONE and t.merged)]
        if pending:
            print("\nwaiting for a human:")
            for t in pending:
                what = {
                    TaskState.AWAITING_APPROVAL: f"t25 approve {t.id}  (or reject)",
                    TaskState.NEEDS_INPUT: f't25 answer {t.id} "…"',
                    TaskState.DONE: f"t25 merge {t.id}",
                    TaskState.FAILED: f"t25 task show {t.id}; t25 retry {t.id}",
                }[t.state]
                print(f"  {t.id}  {t.state:<17}  {what}")
        else:
            print("\nnothing is waiting for a human")
        failed = [t.id for t in waiting if t.state is TaskState.FAILED and t.id in failed_here]
        if failed:
            print(f"\n{len(failed)} task(s) failed in this run: {', '.join(failed)}")
        return not failed

    from t25_tui.runtime import Crew

    worked = run_runtime(args, body, crew=Crew(workers=args.workers))
    if stopped_by:
        return 128 + stopped_by[0]
    return 0 if worked else TASKS_FAILED_EXIT


def logs(args: argparse.Namespace) -> int:
    async def body(control: Operations) -> None:
        ref = args.ref.strip()
        if args.log:
            await _stored_log(control, ref)
            return
        if ref[:1].upper() == "R":
            the_run = await control.run(ref)
            tid, only_run = the_run.task_id, the_run.id
        else:
            tid, only_run = (await control.task(ref)).id, None
        after = 0
        while True:
            events = await control.events(tid, after=after, limit=5000)
            for event in events:
                after = event.id
                if only_run and event.run_id != only_run:
                    continue
                if isinstance(event, RunOutput):
                    (sys.stdout if event.stream == "stdout" else sys.stderr).write(event.text)
                elif isinstance(event, RunStarted | RunFinished) and not only_run:
                    what = event.kind.replace("run_", "")
                    print(f"\n── {printable(event.run_id or '')} {what} ──", flush=True)
            sys.stdout.flush()
            if events:
                continue
            if not args.follow or await _finished(control, tid, only_run):
                return
            await asyncio.sleep(0.2)

    run(args, body)
    return 0


async def _stored_log(control: Operations, ref: str) -> None:
    """A run's log artifact to stdout as it streams from the store, never held whole."""
    the_run = await control.run(ref)
    logs = [
        a
        for a in await control.artifacts(task=the_run.task_id)
        if a.meta.kind is ArtifactKind.LOG and a.meta.run_id == the_run.id
    ]
    if not logs:
        raise NotFound(
            f"{the_run.id} has no log artifact", hint="a run's log is kept once the run finished"
        )
    async for chunk in control.artifact_chunks(logs[-1].id):
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()


async def _finished(control: Operations, tid: str, only_run: str | None) -> bool:
    if only_run:
        return (await control.run(only_run)).finished_at is not None
    task = await control.task(tid)
    return task.state in (
        TaskState.DONE,
        TaskState.CANCELLED,
        TaskState.FAILED,
        *HUMAN_NEEDED,
    )
