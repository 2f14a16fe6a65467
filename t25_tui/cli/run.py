"""`t25 run`: the pipeline at work, from the shell."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from core.domain.events import (
    ApprovalRequested,
    Event,
    InputRequested,
    Resync,
    RunFinished,
    RunOutput,
    RunStarted,
    Subscription,
    TaskTransitioned,
)
from core.domain.models import TaskState
from core.domain.states import HUMAN_NEEDED
from core.domain.text import printable
from t25_tui.cli.context import run_runtime

if TYPE_CHECKING:
    from core.ports import Operations
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


class LiveRuns:
    """On a terminal, one line per run going on, kept at the foot of the output and redrawn
    twice a second: task, stage, adapter, time so far, output so far (tokens come with the
    run's end, when the CLI reports them). Progress lines print above it. Piped, it draws
    nothing: the plain lines alone. Two ANSI sequences (cursor up, erase below) are all it
    needs, so no terminal library is brought in for it."""

    def __init__(self, out: TextIO, *, live: bool) -> None:
        self.out = out
        self.live = live
        self.stage: dict[str, str] = {}  # task -> the stage it is in
        self.running: dict[str, list[Any]] = {}  # run -> [task, stage, adapter, began, bytes]
        self.drawn = 0

    def seen(self, event: Event) -> None:
        match event:
            case TaskTransitioned():
                self.stage[event.task_id or ""] = str(event.to_state)
            case RunStarted():
                task = event.task_id or ""
                stage = self.stage.get(task, "")
                self.running[event.run_id or ""] = [task, stage, event.adapter, time.monotonic(), 0]
            case RunOutput() if event.run_id in self.running:
                self.running[event.run_id][4] += len(event.text)
            case RunFinished():
                self.running.pop(event.run_id or "", None)

    def print(self, line: str) -> None:
        self._erase()
        print(line, file=self.out, flush=not self.live)
        self.draw()

    def draw(self) -> None:
        if not self.live:
            return
        self._erase()
        lines = [self._line(run, *facts) for run, facts in self.running.items()]
        for line in lines:
            self.out.write(line + "\n")
        self.out.flush()
        self.drawn = len(lines)

    def _erase(self) -> None:
        if self.live and self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")
        self.drawn = 0

    @staticmethod
    def _line(run: str, task: str, stage: str, adapter: str | None, began: float, size: int) -> str:
        took = time.monotonic() - began
        return (
            f"  ⟳ {task} {stage} {run} on {adapter or '?'}  {took:5.1f} s  "
            f"{size / 1000:,.1f} kB out"
        )


class _Progress:
    """What `t25 run` prints as it works: a line per event, the runs going on (redrawn on a
    terminal), and the tasks its own runs failed (the bus carries this process's events
    only: a task seen going to FAILED here was failed by the runs this `t25 run` worked)."""

    def __init__(self) -> None:
        self.failed_here: set[str] = set()
        self.live = LiveRuns(sys.stdout, live=sys.stdout.isatty())

    def show(self, item: Event | Resync) -> None:
        if isinstance(item, TaskTransitioned) and item.to_state is TaskState.FAILED:
            self.failed_here.add(item.task_id or "")
        if isinstance(item, Resync):
            return
        self.live.seen(item)
        line = describe(item)
        if line:
            self.live.print(line)

    async def report(self, sub: Subscription) -> None:
        async for item in sub:
            self.show(item)

    async def redraw(self) -> None:
        while self.live.live:
            await asyncio.sleep(0.5)
            self.live.draw()

    def done(self) -> None:
        self.live.running.clear()
        self.live.draw()


async def _worked(
    args: argparse.Namespace, runtime: Runtime, stopped_by: list[signal.Signals]
) -> bool:
    """Work the queue, printing as it goes, until nothing can move (or, with --follow, until
    stopped); True unless a task failed in this run."""
    control, sweeper = runtime.operations, runtime.sweeper
    assert sweeper is not None  # the runtime was opened with in-process workers
    sub = control.bus.subscribe()
    progress = _Progress()
    printer = asyncio.create_task(progress.report(sub))
    drawing = asyncio.create_task(progress.redraw())
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
        drawing.cancel()
        await asyncio.gather(printer, drawing, return_exceptions=True)
        progress.done()
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
        progress.show(item)
    sub.close()
    return await _waiting_for_a_human(control, progress.failed_here)


async def _waiting_for_a_human(control: Operations, failed_here: set[str]) -> bool:
    """What is left for a human, each with its command; False when a task failed here."""
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


def run_(args: argparse.Namespace) -> int:
    stopped_by: list[signal.Signals] = []

    async def body(runtime: Runtime) -> bool:
        return await _worked(args, runtime, stopped_by)

    from t25_tui.runtime import InProcessWorkers

    worked = run_runtime(args, body, in_process=InProcessWorkers(workers=args.workers))
    if stopped_by:
        return 128 + stopped_by[0]
    return 0 if worked else TASKS_FAILED_EXIT
